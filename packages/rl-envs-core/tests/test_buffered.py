"""The in-place rollout path: ``BufferedRollout`` and the ``buffered_stepper`` hook.

Every test compares the fast path (``BufferedCountingEnv``) with the general one
(``CountingEnv``, the same dynamics without the hook) on the same seed: the data
must be bit-equal, and the env and the random generator left in the same state.
"""

from __future__ import annotations

import pytest
import torch

from rl_envs_core.extension import (
    BufferedRollout,
    BufferedStepper,
    SupportsBufferedSteps,
    steps_checked,
)
from rl_envs_core.testing import BufferedCountingEnv, CountingEnv

BATCHES = [(), (3,)]


def assert_same(a, b) -> None:
    assert a.batch_size == b.batch_size
    assert a.names == b.names
    # the same entries (the order of "next" follows the specs, not CountingEnv's _step)
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    for key in b.keys(True, True):
        x, y = a.get(key), b.get(key)
        assert x.dtype == y.dtype and x.shape == y.shape, key
        assert torch.equal(x, y), key


def _pair(batch_size, max_steps=3):
    fast = BufferedCountingEnv(max_steps=max_steps, batch_size=batch_size)
    slow = CountingEnv(max_steps=max_steps, batch_size=batch_size)
    return fast, slow


def _rollouts(env, seed, **kwargs):
    torch.manual_seed(seed)
    env.rollout(2, break_when_any_done=False)  # the first step of an env is checked
    out = [env.rollout(7, **kwargs) for _ in range(3)]
    return out, torch.rand(3)  # what the generator gives next


def test_the_protocols_recognise_a_stepping_env():
    env = BufferedCountingEnv()
    assert isinstance(env, SupportsBufferedSteps)
    assert not isinstance(CountingEnv(), SupportsBufferedSteps)
    engine = BufferedRollout.of(env)
    batch = engine.allocate(4)
    assert env.buffered_stepper(batch) is None  # until a first step went through the checks
    env.rand_step(env.reset())
    assert isinstance(env.buffered_stepper(batch), BufferedStepper)


def test_steps_checked_follows_the_first_step_and_run_type_checks():
    env = BufferedCountingEnv()
    assert not steps_checked(env)
    env.rand_step(env.reset())
    assert steps_checked(env)
    env.run_type_checks = True
    assert not steps_checked(env)


def test_an_env_without_the_hook_has_no_engine():
    assert BufferedRollout.of(CountingEnv()) is None


@pytest.mark.parametrize("batch_size", BATCHES)
def test_allocate_lays_out_a_ted_batch_from_the_specs(batch_size):
    batch = BufferedRollout.of(BufferedCountingEnv(batch_size=batch_size)).allocate(5)
    assert batch.batch_size == torch.Size([*batch_size, 5])
    assert batch.names[-1] == "time"
    assert batch["observation"].shape == torch.Size([*batch_size, 5, 1])
    assert batch["next", "reward"].dtype == torch.float32
    assert batch["next", "done"].dtype == torch.bool
    assert batch["action"].dtype == torch.int64


@pytest.mark.parametrize("batch_size", BATCHES)
def test_random_rollout_is_bit_equal_to_the_general_path(batch_size):
    fast, slow = _pair(batch_size)
    got, next_fast = _rollouts(fast, 0, break_when_any_done=False)
    want, next_slow = _rollouts(slow, 0, break_when_any_done=False)
    assert fast.buffered_batches == 3  # the first rollout went through the checks
    for a, b in zip(got, want):
        assert_same(a, b)
    assert torch.equal(fast.count, slow.count)  # no reset after the last step
    assert torch.equal(next_fast, next_slow)  # the generator advanced alike


@pytest.mark.parametrize("batch_size", BATCHES)
def test_set_truncated_and_out_work_on_the_fast_path(batch_size):
    fast, slow = (env.add_truncated_keys() for env in _pair(batch_size, max_steps=10))
    kwargs = {"break_when_any_done": False, "set_truncated": True}
    got, _ = _rollouts(fast, 1, **kwargs)
    want, _ = _rollouts(slow, 1, **kwargs)
    assert_same(got[-1], want[-1])
    assert bool(got[-1]["next", "truncated"][..., -1, :].all())
    out = BufferedRollout.of(fast).allocate(7)
    result = fast.rollout(7, break_when_any_done=False, out=out)
    assert result is out


def test_rollouts_that_stop_at_a_done_take_the_general_path():
    fast, slow = _pair((), max_steps=3)
    got, _ = _rollouts(fast, 0)
    want, _ = _rollouts(slow, 0)
    assert fast.buffered_batches == 0
    for a, b in zip(got, want):
        assert_same(a, b)


def test_a_declining_stepper_leaves_the_general_path_untouched():
    fast, slow = _pair((2,))
    fast.decline = True
    got, next_fast = _rollouts(fast, 3, break_when_any_done=False)
    want, next_slow = _rollouts(slow, 3, break_when_any_done=False)
    for a, b in zip(got, want):
        assert_same(a, b)
    assert torch.equal(next_fast, next_slow)  # the batch of draws was given back


def test_a_policy_or_callback_takes_the_general_path():
    env = BufferedCountingEnv()
    env.rollout(2, break_when_any_done=False)
    env.rollout(3, policy=env.rand_action, break_when_any_done=False)
    env.rollout(3, callback=lambda e, td: None, break_when_any_done=False)
    assert env.buffered_batches == 0


def test_run_writes_resets_over_the_carried_root():
    env = BufferedCountingEnv(max_steps=2, batch_size=(2,))
    env.rollout(1, break_when_any_done=False)
    assert env.buffered_batches == 0
    engine = BufferedRollout.of(env)
    batch = engine.allocate(5)
    batch["action"].zero_()
    following = engine.run(env.reset(), batch)
    assert batch["observation"][0].squeeze(-1).tolist() == [0, 1, 0, 1, 0]
    assert batch["next", "observation"][0].squeeze(-1).tolist() == [1, 2, 1, 2, 1]
    assert not bool(batch["done"].any())
    assert following["observation"].squeeze(-1).tolist() == [1, 1]


def test_an_engine_built_before_a_spec_change_steps_nothing():
    env = BufferedCountingEnv(batch_size=(2,))
    env.rollout(1, break_when_any_done=False)
    engine = BufferedRollout.cached(env)
    assert engine is BufferedRollout.cached(env)  # kept while the specs stay
    env.observation_spec = env.observation_spec.clone()  # a new version of the specs
    assert not engine.current
    batch = engine.allocate(3)
    assert engine.run(env.reset(), batch) is None
    assert env.buffered_batches == 0
    assert BufferedRollout.cached(env) is not engine


class _RowsStepper:
    """A stepper writing the root entries itself (``fill_rows``), recording its calls."""

    def __init__(self, batch):
        self.batch, self.calls = batch, []

    def fill(self, reset_last=True):
        raise AssertionError("run() must prefer fill_rows")

    def fill_rows(self, carry, reset_last=True):
        self.calls.append((sorted(carry), reset_last))
        self.batch.get("observation").fill_(7)
        return {key: torch.full_like(value, 3) for key, value in carry.items()}


def test_run_lets_a_stepper_write_the_root_entries_itself():
    from rl_envs_core.extension import writes_rows

    steppers = []

    class RowsEnv(BufferedCountingEnv):
        def buffered_stepper(self, batch):
            if super().buffered_stepper(batch) is None:
                return None
            steppers.append(_RowsStepper(batch))
            return steppers[-1]

    env = RowsEnv(batch_size=(2,))
    env.rollout(1, break_when_any_done=False)
    engine = BufferedRollout.of(env)
    batch = engine.allocate(3)
    following = engine.run(env.reset(), batch, reset_last=False)
    assert writes_rows(steppers[0]) and not writes_rows(object())
    assert steppers[0].calls == [(sorted(engine.carried), False)]
    assert bool((batch["observation"] == 7).all())  # the engine wrote nothing over it
    assert following.batch_size == env.batch_size
    assert sorted(following.keys()) == sorted(engine.carried)
    assert bool((following["observation"] == 3).all())


class _StepwiseStepper:
    """A per-step stepper (``step(t)`` only) for a counting env: counts, resets at max_steps."""

    def __init__(self, env, batch):
        self.env, self.dim = env, len(env.batch_size)
        nxt = batch.get("next")
        names = ("observation", "reward", "done", "terminated", "truncated")
        self.entries = [nxt.get(name, None) for name in names]

    def fill(self, reset_last=True):
        raise AssertionError("start() steps one step at a time")

    def step(self, t):
        env, dim = self.env, self.dim
        env.count = env.count + 1
        done = env.count >= env.max_steps
        obs, reward, done_out, terminated, truncated = (
            None if e is None else e.select(dim, t) for e in self.entries
        )
        obs.copy_(env.count)
        reward.fill_(1.0)
        done_out.copy_(done)
        terminated.copy_(done)
        if truncated is not None:
            truncated.zero_()
        if not bool(done.any()):
            return None
        finished = done.reshape(-1).nonzero().squeeze(-1)
        env.count = torch.where(done, 0, env.count)
        firsts = env.count.reshape(-1, 1)[finished]
        return torch.full((len(finished),), t), finished if dim else None, {"observation": firsts}


class _StepwiseEnv(BufferedCountingEnv):
    def buffered_stepper(self, batch):
        return _StepwiseStepper(self, batch)


@pytest.mark.parametrize("batch_size", BATCHES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])  # numpy has no bfloat16
def test_step_by_step_writes_each_root_from_the_step_before_or_its_reset(batch_size, dtype):
    from rl_specs import Composite, Unbounded

    env = _StepwiseEnv(max_steps=2, batch_size=batch_size)
    shape = (*batch_size, 1)
    env.observation_spec = Composite(
        observation=Unbounded(shape=shape, dtype=dtype), shape=batch_size
    )
    engine = BufferedRollout.of(env)
    batch = engine.allocate(5)
    run = engine.start(env.reset(), batch, read=["observation"])
    for t in range(5):
        run.step(t)
    roots = batch["observation"].reshape(-1, 5)
    nexts = batch["next", "observation"].reshape(-1, 5)
    assert roots.dtype == nexts.dtype == dtype
    for row, next_row in zip(roots.tolist(), nexts.tolist()):
        assert row == [0, 1, 0, 1, 0]  # the step before's "next", or the reset's 0
        assert next_row == [1, 2, 1, 2, 1]
    assert run.following()["observation"].reshape(-1).tolist() == [1.0] * len(roots)
