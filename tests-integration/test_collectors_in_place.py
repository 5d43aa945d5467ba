"""Collectors over gym and EnvPool: in-place batches equal the general path's (cross-package).

Each adapter class is compared with a subclass whose ``buffered_stepper`` declines
(the general path, ``env.step`` per step), on the same seed: every batch, traj ids
included, must be bit-equal.
"""

from __future__ import annotations

from functools import partial

import pytest
import torch
from tensordict.nn import TensorDictModule

from rl_stack.collectors import SyncDataCollector
from rl_stack.data import OneHot
from rl_stack.envs import GymEnv, MultiThreadedEnv, ParallelEnv, SerialEnv

pytest.importorskip("gymnasium")


class GeneralGymEnv(GymEnv):
    def buffered_stepper(self, batch):
        return None


class GeneralPoolEnv(MultiThreadedEnv):
    def buffered_stepper(self, batch):
        return None


class CountedGymEnv(GymEnv):
    """Counts the steps made through its stepper's per-step mode."""

    in_place_steps = 0

    def buffered_stepper(self, batch):
        stepper = super().buffered_stepper(batch)
        if stepper is None:
            return None
        step = stepper.step

        def counted(t):
            type(self).in_place_steps += 1
            return step(t)

        stepper.step = counted
        return stepper


def _batches(env, frames_per_batch, n=3):
    torch.manual_seed(0)
    collector = SyncDataCollector(env, None, frames_per_batch=frames_per_batch, total_frames=-1)
    batches = []
    for batch in collector:
        batches.append(batch.clone())
        if len(batches) == n:
            break
    collector.shutdown()
    return batches


def _assert_same(got, want):
    for a, b in zip(got, want, strict=True):
        assert a.batch_size == b.batch_size and a.names == b.names
        assert set(a.keys(True, True)) == set(b.keys(True, True))
        for key in b.keys(True, True):
            assert a.get(key).dtype == b.get(key).dtype, key
            assert torch.equal(a.get(key), b.get(key)), key


def _seeded(env):
    env.set_seed(0)
    return env


def test_gym_collector_in_place_equals_the_general_path():
    got = _batches(_seeded(GymEnv("CartPole-v1")), 200)
    want = _batches(_seeded(GeneralGymEnv("CartPole-v1")), 200)
    _assert_same(got, want)
    assert int(torch.cat([b["next", "done"] for b in got]).sum()) > 3  # resets happened


def test_envpool_collector_in_place_equals_the_general_path():
    pytest.importorskip("envpool")
    kwargs = {"create_env_kwargs": {"seed": 1}}
    got = _batches(MultiThreadedEnv(6, "CartPole-v1", **kwargs), 300)
    want = _batches(GeneralPoolEnv(6, "CartPole-v1", **kwargs), 300)
    _assert_same(got, want)


@pytest.mark.parametrize("batched", [SerialEnv, ParallelEnv], ids=["serial", "parallel"])
def test_batched_gym_collectors_in_place_equal_the_general_path(batched):
    got = _batches(_seeded(batched(3, partial(GymEnv, "CartPole-v1"))), 150)
    want = _batches(_seeded(batched(3, partial(GeneralGymEnv, "CartPole-v1"))), 150)
    _assert_same(got, want)


# ------------------------------------------------------------------ with a policy
class _Linear(torch.nn.Module):
    """A deterministic policy: argmax of a seeded ``Linear`` in the spec's encoding, and
    its logits."""

    def __init__(self, spec):
        super().__init__()
        torch.manual_seed(3)
        self.linear = torch.nn.Linear(4, 2)
        self.dtype = spec.dtype
        self.one_hot = isinstance(spec, OneHot)  # EnvPool gives indices, GymEnv one-hot

    def encode(self, index):
        return (torch.nn.functional.one_hot(index, 2) if self.one_hot else index).to(self.dtype)

    def forward(self, observation):
        logits = self.linear(observation)
        return self.encode(logits.argmax(-1)), logits


class _Sampled(_Linear):
    """A stochastic policy: draws from torch's generator at every step."""

    def forward(self, observation):
        logits = self.linear(observation)
        return self.encode(torch.distributions.Categorical(logits=logits).sample()), logits


def _module(env, cls=_Linear):
    from tensordict.nn import TensorDictModule

    return TensorDictModule(
        cls(env.action_spec), in_keys=["observation"], out_keys=["action", "logits"]
    )


def _plain(env):
    linear = _Linear(env.action_spec)
    return lambda observation: linear(observation)[0]


def _policy_batches(env, make_policy, frames_per_batch, n=3):
    torch.manual_seed(0)
    collector = SyncDataCollector(
        env, make_policy(env), frames_per_batch=frames_per_batch, total_frames=-1
    )
    batches = []
    for batch in collector:
        batches.append(batch.clone())
        if len(batches) == n:
            break
    plan = collector._on_views
    collector.shutdown()
    env.close()
    return batches, plan is not None and plan.ready


class _AsDict(_Linear):
    """A module returning its outputs as a dict (TensorDictModule picks them by out key)."""

    def forward(self, observation):
        action, logits = super().forward(observation)
        return {"logits": logits, "action": action}


class _Wrapped(TensorDictModule):
    """A TensorDictModule subclass: the collector calls the wrapper, not its module alone."""


def _wrapped(env):
    return _Wrapped(
        _Linear(env.action_spec), in_keys=["observation"], out_keys=["action", "logits"]
    )


_POLICIES = {
    "tdmodule": _module,
    "sampled": partial(_module, cls=_Sampled),
    "as_dict": partial(_module, cls=_AsDict),
    "subclass": _wrapped,
    "plain": _plain,
}


@pytest.mark.parametrize("policy", list(_POLICIES), ids=list(_POLICIES))
def test_gym_collector_with_a_policy_in_place_equals_the_general_path(policy):
    make = _POLICIES[policy]
    CountedGymEnv.in_place_steps = 0
    got, in_place = _policy_batches(_seeded(CountedGymEnv("CartPole-v1")), make, 150)
    want, _ = _policy_batches(_seeded(GeneralGymEnv("CartPole-v1")), make, 150)
    # the first batch learns the policy's outputs, the others step in place
    assert in_place and CountedGymEnv.in_place_steps == 300
    _assert_same(got, want)
    assert int(torch.cat([b["next", "done"] for b in got[1:]]).sum()) >= 2  # resets in place
    if policy != "plain":
        assert got[1]["logits"].shape == (150, 2)


@pytest.mark.parametrize("policy", list(_POLICIES), ids=list(_POLICIES))
def test_envpool_collector_with_a_policy_in_place_equals_the_general_path(policy):
    pytest.importorskip("envpool")
    make = _POLICIES[policy]
    kwargs = {"create_env_kwargs": {"seed": 1}}
    got, in_place = _policy_batches(MultiThreadedEnv(5, "CartPole-v1", **kwargs), make, 250)
    want, _ = _policy_batches(GeneralPoolEnv(5, "CartPole-v1", **kwargs), make, 250)
    assert in_place
    _assert_same(got, want)
    assert int(torch.cat([b["next", "done"] for b in got[1:]]).sum()) >= 2


_BAD_OUTPUTS = {
    # after the first batch (20 steps, the general path, which learns the outputs)
    "logits shape changes": (lambda a, logits: (a, logits[:1]), ValueError, "'logits' with shape"),
    "logits missing": (lambda a, logits: a, RuntimeError, r"returned 1 tensor\(s\) for its 2"),
}


@pytest.mark.parametrize("bad", list(_BAD_OUTPUTS))
def test_a_policy_changing_its_outputs_in_place_gets_a_clear_error(bad):
    change, error, message = _BAD_OUTPUTS[bad]
    env = _seeded(GymEnv("CartPole-v1"))
    linear = _Linear(env.action_spec)
    calls = []

    def forward(observation):
        calls.append(1)
        action, logits = linear(observation)
        return (action, logits) if len(calls) <= 20 else change(action, logits)

    policy = TensorDictModule(forward, in_keys=["observation"], out_keys=["action", "logits"])
    collector = SyncDataCollector(env, policy, frames_per_batch=20, total_frames=-1)
    it = iter(collector)
    next(it)
    with pytest.raises(error, match=message):
        next(it)
    collector.shutdown()


@pytest.mark.parametrize("batched", [SerialEnv, ParallelEnv], ids=["serial", "parallel"])
def test_batched_gym_collectors_with_a_policy_equal_the_general_path(batched):
    # SerialEnv steps its sub-envs' steppers one step at a time; ParallelEnv keeps
    # the general path with a policy (its workers fill whole batches only)
    got, in_place = _policy_batches(
        _seeded(batched(3, partial(GymEnv, "CartPole-v1"))), _module, 120
    )
    want, _ = _policy_batches(
        _seeded(batched(3, partial(GeneralGymEnv, "CartPole-v1"))), _module, 120
    )
    assert in_place
    _assert_same(got, want)


def test_envpool_random_then_policy_batches_equal_the_general_path():
    # the time-major random batches (episodes cut at 9 steps: some end at a batch's
    # last step) hand their next root to the policy batches that follow
    pytest.importorskip("envpool")
    kwargs = {"create_env_kwargs": {"seed": 2, "max_episode_steps": 9}}

    def batches(env):
        torch.manual_seed(0)
        collector = SyncDataCollector(
            env, _module(env), frames_per_batch=4 * 18, total_frames=-1, init_random_frames=144
        )
        out = []
        for batch in collector:
            out.append(batch.clone())
            if len(out) == 4:
                break
        collector.shutdown()
        return out

    got = batches(MultiThreadedEnv(4, "CartPole-v1", **kwargs))
    want = batches(GeneralPoolEnv(4, "CartPole-v1", **kwargs))
    _assert_same(got, want)
    assert bool(got[0]["next", "done"][:, -1].any())  # finished at the last random step
    assert "logits" in got[3].keys() and "logits" not in got[0].keys()
