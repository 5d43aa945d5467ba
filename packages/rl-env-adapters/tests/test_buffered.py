"""The adapters' ``buffered_stepper`` hook: in-place steps equal to ``env.step``'s.

Each test runs the same seeded random rollout through the fast path and through
the general one (a subclass whose hook declines) and compares the data bit for
bit, key order included.
"""

from __future__ import annotations

import pytest
import torch

from rl_env_adapters import GymEnv, MultiThreadedEnv
from rl_envs_core.extension import BufferedRollout

gymnasium = pytest.importorskip("gymnasium")


class GeneralGymEnv(GymEnv):
    """GymEnv without the in-place path."""

    def buffered_stepper(self, batch):
        return None


class SpiedGymEnv(GymEnv):
    """GymEnv counting the batches its hook steps."""

    calls = 0

    def buffered_stepper(self, batch):
        stepper = super().buffered_stepper(batch)
        self.calls += stepper is not None
        return stepper


class SpiedPoolEnv(MultiThreadedEnv):
    """MultiThreadedEnv counting the batches its hook steps."""

    calls = 0

    def buffered_stepper(self, batch):
        stepper = super().buffered_stepper(batch)
        self.calls += stepper is not None
        return stepper


class GeneralPoolEnv(MultiThreadedEnv):
    """MultiThreadedEnv without the in-place path."""

    def buffered_stepper(self, batch):
        return None


class CustomStepGymEnv(GymEnv):
    """A subclass changing the step: the hook must not bypass it."""

    def _step(self, tensordict):
        return super()._step(tensordict)


def assert_same(a, b) -> None:
    assert a.batch_size == b.batch_size
    assert a.names == b.names
    assert list(a.keys(True, True)) == list(b.keys(True, True))
    for key in b.keys(True, True):
        x, y = a.get(key), b.get(key)
        assert x.dtype == y.dtype and x.shape == y.shape, key
        assert torch.equal(x, y), key


def _rollouts(env, steps=60, n=3):
    torch.manual_seed(0)
    env.rollout(2, break_when_any_done=False)  # the first step runs the env's checks
    out = [env.rollout(steps, break_when_any_done=False) for _ in range(n)]
    return out, env.rand_step(env.reset())


@pytest.mark.parametrize(
    "env_id, kwargs",
    [
        ("CartPole-v1", {}),
        ("CartPole-v1", {"categorical_action_encoding": True}),
        ("Pendulum-v1", {}),
        ("MountainCarContinuous-v0", {}),
    ],
)
def test_gym_rollout_in_place_equals_the_general_path(env_id, kwargs):
    fast, slow = SpiedGymEnv(env_id, **kwargs), GeneralGymEnv(env_id, **kwargs)
    fast.set_seed(0)
    slow.set_seed(0)
    got, after_fast = _rollouts(fast)
    assert fast.calls == 3
    want, after_slow = _rollouts(slow)
    for a, b in zip(got, want, strict=True):
        assert_same(a, b)
    assert_same(after_fast, after_slow)  # the env was left in the same state


@pytest.mark.parametrize(
    "make",
    [
        lambda: GymEnv("CartPole-v1", frame_skip=2),
        lambda: GymEnv("CartPole-v1", num_envs=2, vectorization_mode="sync"),
        lambda: GymEnv("CartPole-v1").set_info_dict_reader(),
        lambda: GymEnv("CartPole-v1", from_pixels=True, pixels_only=True),
        lambda: CustomStepGymEnv("CartPole-v1"),
    ],
    ids=["frame_skip", "vector", "info_reader", "pixels", "custom_step"],
)
def test_gym_envs_the_hook_does_not_cover_decline(make, request):
    try:
        env = make()
    except Exception as err:
        if "pixels" not in request.node.callspec.id:
            raise
        pytest.skip(f"from_pixels needs a renderer (OpenGL) this machine lacks: {err}")
    env.rand_step(env.reset())  # past the first, checked step
    engine = BufferedRollout.of(env)
    batch = engine.allocate(2) if engine is not None else None
    assert engine is None or env.buffered_stepper(batch) is None
    env.close()


def test_a_gym_env_declines_until_its_first_step_is_checked():
    env = GymEnv("CartPole-v1")
    batch = BufferedRollout.of(env).allocate(2)
    assert env.buffered_stepper(batch) is None
    env.rand_step(env.reset())
    assert env.buffered_stepper(batch) is not None


def test_gym_stepper_rejects_a_non_scalar_reward_clearly():
    class VectorReward(gymnasium.Wrapper):
        steps = 0

        def step(self, action):  # a vector reward from the second step on
            obs, reward, terminated, truncated, info = self.env.step(action)
            self.steps += 1
            return obs, reward if self.steps == 1 else [reward, reward], terminated, truncated, info

    from rl_env_adapters import GymWrapper

    env = GymWrapper(VectorReward(gymnasium.make("CartPole-v1")))
    env.rand_step(env.reset())
    engine = BufferedRollout.of(env)
    batch = engine.allocate(2)
    batch["action"] = env.action_spec.rand(torch.Size([2]))
    env.reset()
    stepper = env.buffered_stepper(batch)
    with pytest.raises(ValueError, match="reward"):
        stepper.fill()


def test_envpool_rollout_in_place_equals_the_general_path():
    pytest.importorskip("envpool")
    kwargs = {"create_env_kwargs": {"seed": 3}}
    fast = SpiedPoolEnv(4, "CartPole-v1", **kwargs)
    slow = GeneralPoolEnv(4, "CartPole-v1", **kwargs)
    got, after_fast = _rollouts(fast, steps=40)
    assert fast.calls == 3
    want, after_slow = _rollouts(slow, steps=40)
    assert bool(torch.cat([g["next", "done"] for g in got], 1).any())  # resets happened
    for a, b in zip(got, want, strict=True):
        assert_same(a, b)
    assert_same(after_fast, after_slow)
    fast.close()
    slow.close()


def test_envpool_with_frame_skip_declines():
    pytest.importorskip("envpool")
    env = MultiThreadedEnv(2, "CartPole-v1", frame_skip=2)
    env.rand_step(env.reset())
    assert env.buffered_stepper(BufferedRollout.of(env).allocate(2)) is None
    env.close()
