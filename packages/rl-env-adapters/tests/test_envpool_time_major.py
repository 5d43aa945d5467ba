"""EnvPool's time-major in-place path: the same batches as the per-call path and ``env.step``.

Each test runs the same seeded actions through the time-major stepper (calls
recorded, rows gathered at the end), the per-call stepper (``PoolStepper``) and the
general path (``env.step_and_maybe_reset`` per step) and compares every entry bit
for bit, over several batches: episodes ending inside a batch, at its last step
(the reset made by one more auto-reset call, its observation the next root) and
in the tail of the batch, where only the envs short of their steps are stepped.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rl_env_adapters import MultiThreadedEnv
from rl_env_adapters._envpool import _buffered, _time_major
from rl_env_adapters._envpool._buffered import PoolStepper, TimeMajorStepper
from rl_envs_core import step_mdp
from rl_envs_core.extension import BufferedRollout

pytest.importorskip("envpool")

ROOT = ["observation", "done", "terminated", "truncated"]


class ByCallPoolEnv(MultiThreadedEnv):
    """The per-call stepper, whatever the observation size."""

    def buffered_stepper(self, batch):
        stepper = super().buffered_stepper(batch)
        return None if stepper is None else PoolStepper(self, batch, "observation")


class GeneralPoolEnv(MultiThreadedEnv):
    """No in-place path: ``env.step`` per step."""

    def buffered_stepper(self, batch):
        return None


@pytest.fixture
def recorded(monkeypatch):
    """The ``Calls`` of every time-major batch."""
    seen = []

    def spy(*args, **kwargs):
        calls = _time_major.step_calls(*args, **kwargs)
        seen.append(calls)
        return calls

    monkeypatch.setattr(_buffered, "step_calls", spy)
    return seen


def _env(cls, n, task, **kwargs):
    env = cls(n, task, create_env_kwargs={"seed": 7, **kwargs})
    env.rand_step(env.reset())  # the first step goes through env.step's checks
    return env


def _actions(env, steps, batches):
    torch.manual_seed(0)
    return [env.action_spec.rand(torch.Size([steps])).transpose(0, 1) for _ in range(batches)]


def _in_place(env, actions):
    """Batches of the engine (as a collector runs them: the finished envs reset)."""
    engine = BufferedRollout.of(env)
    carry = env.reset()
    out = []
    for action in actions:
        batch = engine.allocate(action.shape[1])
        batch["action"] = action
        carry = engine.run(carry, batch)
        assert carry is not None
        out.append((batch, carry.select(*ROOT)))
    return out


def _general(env, actions):
    carry = env.reset()
    out = []
    for action in actions:
        steps = []
        for t in range(action.shape[1]):
            carry["action"] = action[:, t]
            data, carry = env.step_and_maybe_reset(carry)
            steps.append(data)
        out.append((torch.stack(steps, 1), carry.select(*ROOT).clone()))
    return out


def _assert_same(got, want):
    for (batch, carry), (ref, ref_carry) in zip(got, want, strict=True):
        assert batch.batch_size == ref.batch_size
        keys = [*ROOT, "action", *(("next", k) for k in [*ROOT, "reward"])]
        for key in keys:
            a, b = batch.get(key), ref.get(key)
            assert a.dtype == b.dtype and a.shape == b.shape, key
            assert torch.equal(a, b), key
        for key in ROOT:
            assert torch.equal(carry.get(key), ref_carry.get(key)), key


@pytest.mark.parametrize(
    "task, steps, kwargs",
    [
        ("CartPole-v1", 7, {"max_episode_steps": 7}),  # every episode ends at a batch's end
        ("CartPole-v1", 50, {}),  # an episode ends in the tail of a batch
        ("Pendulum-v1", 12, {"max_episode_steps": 5}),  # float actions
    ],
    ids=["boundary", "tail", "pendulum"],
)
def test_time_major_batches_equal_the_per_call_and_general_paths(task, steps, kwargs, recorded):
    envs = [_env(cls, 5, task, **kwargs) for cls in (MultiThreadedEnv, ByCallPoolEnv)]
    general = _env(GeneralPoolEnv, 5, task, **kwargs)
    actions = _actions(general, steps, 4)
    got = _in_place(envs[0], actions)
    assert len(recorded) == 4  # every batch took the time-major path
    by_call = _in_place(envs[1], actions)
    want = _general(general, actions)
    _assert_same(got, want)
    _assert_same(by_call, want)
    done = torch.stack([b.get(("next", "done")) for b, _ in got])
    assert bool(done.any())
    if kwargs.get("max_episode_steps") == steps:  # at the last step: reset by one more call
        assert bool(done[:, :, -1].all())
        assert all(bool((c.count == steps + 1).all()) for c in recorded)
    if steps == 50:  # the tail steps the envs short of their steps; one finishes there
        assert any(len(set(c.count.tolist())) > 1 for c in recorded)
        assert any(_reset_in_tail(c) for c in recorded)


def _reset_in_tail(calls):
    """Whether an env was reset in the tail other than after its last step."""
    resets = calls.resets.copy()
    resets[calls.count - 1, np.arange(len(calls.count))] = False
    return bool(resets[calls.full :].any())


def test_a_rollout_leaves_the_envs_finished_at_its_last_step_to_the_next_step():
    # rollout() does not reset after its last step: the finished envs are owed a
    # reset, which the next rollout (or step) makes as on the general path
    kwargs = {"max_episode_steps": 6}
    fast, slow = (
        _env(cls, 4, "CartPole-v1", **kwargs) for cls in (MultiThreadedEnv, GeneralPoolEnv)
    )
    results = []
    for env in (fast, slow):
        torch.manual_seed(1)
        first = env.rollout(6, break_when_any_done=False)
        assert bool(first["next", "done"][:, -1].all())
        again = env.rollout(
            6, auto_reset=False, tensordict=step_mdp(first[:, -1]), break_when_any_done=False
        )
        results.append((first, again, env.rand_step(step_mdp(again[:, -1]))))
    for a, b in zip(*results, strict=True):
        for key in b.keys(True, True):
            assert torch.equal(a.get(key), b.get(key)), key


def test_large_observations_keep_the_per_call_stepper(monkeypatch):
    env = _env(MultiThreadedEnv, 2, "CartPole-v1")
    batch = BufferedRollout.of(env).allocate(3)
    assert isinstance(env.buffered_stepper(batch), TimeMajorStepper)
    monkeypatch.setattr(_time_major, "MAX_OBS_BYTES", 8)  # CartPole's 16 bytes: too large
    stepper = env.buffered_stepper(batch)
    assert isinstance(stepper, PoolStepper) and not isinstance(stepper, TimeMajorStepper)


def test_call_record_limits_and_reuse():
    f32 = np.dtype(np.float32)
    assert _time_major.CallRecord.fits(200, 32, (4,), f32)
    assert not _time_major.CallRecord.fits(200, 32, (4, 84, 84), np.dtype(np.uint8))
    assert not _time_major.CallRecord.fits(10**6, 32, (4,), f32)  # over the total size
    pool = MultiThreadedEnv(2, "CartPole-v1")._env
    record = _time_major.CallRecord(pool)
    first = record.buffers(8, 2, (4,), f32, f32)
    assert record.buffers(8, 2, (4,), f32, f32) is first  # kept between batches
    assert record.buffers(10, 2, (4,), f32, f32)[0].shape == (11, 2, 4)


def test_direct_step_falls_back_to_the_public_step_for_other_pools():
    class OtherPool:  # no C++ _send/_recv: another EnvPool generation
        def step(self, action, env_id=None):
            n = len(action)
            terminated = np.array([True] + [False] * (n - 1))
            truncated = np.array([False] * (n - 1) + [True])
            return np.zeros((n, 2)), np.ones(n), terminated, truncated, {}

    *_, done, truncated = _time_major.direct_step(OtherPool())(np.zeros(3), None)
    assert done.tolist() == [True, False, True] and truncated.tolist() == [False, False, True]


def test_direct_step_gives_the_public_step_outputs():
    import envpool

    pools = [envpool.make("CartPole-v1", env_type="gymnasium", num_envs=3, seed=2) for _ in "ab"]
    for pool in pools:
        pool.reset()
    direct = _time_major.direct_step(pools[0])
    for t in range(30):
        action = np.array([t % 2, 1, 0], dtype=np.int32)
        ids = None if t % 3 else np.array([2, 0], dtype=np.int32)
        sub = action if ids is None else action[: len(ids)]
        obs, reward, done, truncated = direct(sub, ids)
        o, r, te, tr, _ = pools[1].step(sub, ids)
        assert np.array_equal(obs, o) and np.array_equal(reward, r)
        assert np.array_equal(done, te | tr) and np.array_equal(truncated, tr)
