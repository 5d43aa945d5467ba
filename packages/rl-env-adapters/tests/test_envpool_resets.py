"""EnvPool partial resets: prefetched right after the step or made on demand, same data."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rl_env_adapters import MultiThreadedEnv, MultiThreadedEnvWrapper
from rl_env_adapters._envpool._resets import PoolResets, keep_rows, scatter_rows

envpool = pytest.importorskip("envpool")


def _pair(task="CartPole-v1", num_envs=4, **kwargs):
    """The same pool twice: resets prefetched (the fast path) and made when asked."""
    fast = MultiThreadedEnv(num_envs, task, seed=3, **kwargs)
    slow = MultiThreadedEnv(num_envs, task, seed=3, **kwargs)
    slow._resets._prefetch = False
    assert fast._resets._prefetch
    return fast, slow


def _drive(env, steps=40):
    """Steps and resets of every kind: of the finished envs, more, fewer, none, all."""
    torch.manual_seed(1)
    td, seen = env.reset(), []
    for i in range(steps):
        td = env.rand_step(td)
        seen.append(td["next"].clone())
        nxt = td["next"].exclude("reward")
        kind = i % 5
        if kind == 4:
            td = env.reset()
        elif kind == 3:  # step on without a reset: finished envs restart from a reset
            td = nxt.exclude("done", "terminated", "truncated")
        else:
            mask = nxt["done"].clone()
            if kind == 1:
                mask[0] = True  # reset one more env than finished
            elif kind == 2:
                mask[1:] = False  # leave some finished envs for a later call
            nxt.set("_reset", mask)
            td = env.reset(nxt)
        seen.append(td.clone())
    return seen


@pytest.mark.parametrize(
    ("task", "kwargs"),
    [
        ("CartPole-v1", {}),
        ("CartPole-v1", {"max_episode_steps": 3}),
        ("Pendulum-v1", {"max_episode_steps": 4}),
        ("CartPole-v1", {"frame_skip": 2, "max_episode_steps": 5}),
    ],
)
def test_prefetched_resets_match_resets_made_when_asked(task, kwargs):
    fast, slow = _pair(task, **kwargs)
    for a, b in zip(_drive(fast), _drive(slow), strict=True):
        assert (a == b).all()
    torch.manual_seed(0)
    first = fast.rollout(50, break_when_any_done=False)
    torch.manual_seed(0)
    assert (first == slow.rollout(50, break_when_any_done=False)).all()


def test_rollouts_match_the_on_demand_path_after_breaking():
    fast, slow = _pair(max_episode_steps=6)
    for env in (fast, slow):
        torch.manual_seed(0)
        env.__dict__["_runs"] = [env.rollout(10), env.rollout(10, break_when_any_done=False)]
    for a, b in zip(fast._runs, slow._runs, strict=True):
        assert (a == b).all()


def test_a_rendering_pool_resets_when_asked():
    env = MultiThreadedEnv(2, "CartPole-v1", render_mode="rgb_array", max_episode_steps=2)
    assert not env._resets._prefetch
    data = env.rand_step(env.rand_step(env.reset()))
    assert data["next", "done"].all()
    assert env.render(env_ids=[0]).shape[0] == 1  # the finished state, not a reset one


@pytest.mark.parametrize("then", ["close", "async_reset", "set_seed", "recv"])
def test_a_reset_in_flight_is_received_before_other_calls(then):
    env = MultiThreadedEnv(2, "CartPole-v1", max_episode_steps=1, seed=0)
    env.rand_step(env.reset())
    assert env._resets._in_flight is not None
    if then == "close":
        env.close()
    elif then == "set_seed":
        env.set_seed(4)
        assert env.reset()["observation"].shape == (2, 4)
    else:
        env.async_reset()
        if then == "recv":
            assert env.recv()["is_init"].all()
    assert env._resets._in_flight is None


def test_wrapped_pool_sees_no_ignored_action():
    pool = envpool.make(
        "CartPole-v1", env_type="gymnasium", num_envs=3, seed=0, max_episode_steps=2
    )
    data = MultiThreadedEnvWrapper(pool).rollout(9, break_when_any_done=False)
    assert bool((data["next", "reward"] == 1).all())
    assert int(data["next", "done"].sum()) == 12


def test_pool_resets_on_their_own():
    pool = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=3, seed=0)
    resets = PoolResets(pool, lambda obs: {"obs": torch.from_numpy(obs)}, 3, prefetch=True)
    full = resets.reset(None)["obs"]
    assert full.shape == (3, 4) and bool(full.abs().sum(-1).gt(0).all())
    resets.after_step(np.array([True, True, False]))
    only_first = resets.reset(np.array([True, False, False]))["obs"]
    assert bool(only_first[1:].eq(0).all()) and bool(only_first[0].ne(0).any())
    later = resets.reset(np.array([False, True, True]))["obs"]  # 1 prefetched, 2 reset now
    assert bool(later[0].eq(0).all()) and bool(later[1:].ne(0).any(-1).all())
    assert resets._fresh is None


def test_row_helpers():
    values = {"a": torch.tensor([[1.0], [2.0]]), "b": {"c": torch.tensor([True, True])}}
    out = scatter_rows(values, np.array([0, 2]), 3)
    assert out["a"].squeeze(-1).tolist() == [1.0, 0.0, 2.0]
    assert out["b"]["c"].tolist() == [True, False, True]
    kept = keep_rows(out, np.array([False, False, True]))
    assert kept["a"].squeeze(-1).tolist() == [0.0, 0.0, 2.0]
    assert kept["b"]["c"].tolist() == [False, False, True]
    assert scatter_rows(values, np.array([0, 1]), 2) is values


class TestOutputFastPath:
    def test_same_data_as_the_checked_constructor(self):
        fast = MultiThreadedEnv(3, "CartPole-v1", seed=0)
        slow = MultiThreadedEnv(3, "CartPole-v1", seed=0)
        slow._build_output.trusted = False  # forces TensorDict(...)
        torch.manual_seed(0)
        a = fast.rollout(30, break_when_any_done=False)
        torch.manual_seed(0)
        b = slow.rollout(30, break_when_any_done=False)
        assert (a == b).all()
        step = fast.rand_step(fast.reset())["next"]
        assert step.batch_size == (3,) and step.device is None
        assert all(v.shape[0] == 3 for v in step.values())

    def test_moved_env_takes_the_checked_path(self):
        env = MultiThreadedEnv(2, "CartPole-v1", device="cpu")
        env.to("cpu")  # a new device object: the readers are not trusted for it any more
        assert env._device is not env._build_output.device
        assert env.rand_step(env.reset())["next", "observation"].device.type == "cpu"
