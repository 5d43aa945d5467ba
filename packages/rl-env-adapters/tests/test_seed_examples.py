"""The examples of the Libraries section (000/001) and of EnvPool's interface (004) that run offline.

The ``gym`` package is not installed here: examples written for it run on gymnasium,
or on a stand-in module where only the version matters (``implement_for``).
"""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest
import torch

from rl_env_adapters import GymEnv, MultiThreadedEnv, gym_backend, implement_for, set_gym_backend

gymnasium = pytest.importorskip("gymnasium")


class TestLibrariesSection:
    def test_set_gym_backend_example(self):
        with set_gym_backend(gymnasium):
            assert gym_backend() is gymnasium
            env1 = GymEnv("Pendulum-v1")
        inner = env1._env.env.env
        assert type(inner).__name__ == "PendulumEnv"
        assert type(inner).__module__ == "gymnasium.envs.classic_control.pendulum"

    def test_gym_backend_wrappers_example(self):
        with set_gym_backend("gymnasium"):
            wrappers = gym_backend("wrappers")
        assert wrappers.__name__ == "gymnasium.wrappers"

    def test_implement_for_example(self, monkeypatch):
        legacy = types.ModuleType("gym")
        legacy.__version__ = "0.26.2"
        monkeypatch.setitem(sys.modules, "gym", legacy)

        @implement_for("gym", None, "0.26.0")
        def fun():
            return 0

        @implement_for("gym", "0.26.0", None)
        def fun():  # noqa: F811 - the documented pattern
            return 1

        with set_gym_backend(legacy):
            assert fun() == 1

    def test_auto_resetting_gym_env_example(self):
        torch.manual_seed(0)

        class AutoResettingGymEnv(GymEnv):
            def _step(self, tensordict):
                tensordict = super()._step(tensordict)
                if tensordict["done"].any():
                    td_reset = super().reset()
                    tensordict.update(td_reset.exclude(*self.done_keys))
                return tensordict

            def _reset(self, tensordict=None):
                if tensordict is not None and "_reset" in tensordict:
                    return tensordict.copy()
                return super()._reset(tensordict)

        with set_gym_backend("gymnasium"):
            env = AutoResettingGymEnv("CartPole-v1", auto_reset=True, auto_reset_replace=True)
            env.set_seed(0)
            r = env.rollout(30, break_when_any_done=False)
        done = r["next", "done"].squeeze()
        assert done.shape == (30,) and bool(done.any())
        obs = r["next", "observation"]
        assert bool(obs[done].isnan().all())  # "observation after reset are set as nan"
        assert not bool(obs[~done].isnan().any())


class TestEnvPoolInterface:
    envpool = None

    @pytest.fixture(autouse=True)
    def _envpool(self):
        type(self).envpool = pytest.importorskip("envpool")

    def test_auto_reset_table(self):
        """004's table: with max_episode_steps=3, calls 1 and 5 are resets that drop the action."""
        pool = self.envpool.make(
            "CartPole-v1", env_type="gymnasium", num_envs=1, max_episode_steps=3
        )
        pool.reset()
        elapsed, truncated = [], []
        for _ in range(5):
            *_, trunc, info = pool.step(np.zeros(1, dtype=np.int32))
            elapsed.append(int(info["elapsed_step"][0]))
            truncated.append(bool(trunc[0]))
        assert elapsed == [1, 2, 3, 0, 1] and truncated == [False, False, True, False, False]

        # ours: the dropped-action call never appears as a transition
        env = MultiThreadedEnv(1, "CartPole-v1", max_episode_steps=3)
        data = env.rollout(6, break_when_any_done=False)
        assert data["next", "truncated"].squeeze().tolist() == [False, False, True] * 2
        assert bool((data["next", "reward"] == 1).all())

    def test_action_formats(self):
        """004's send formats: array, array with env_id, and the dict form."""
        pool = self.envpool.make("CartPole-v1", env_type="gymnasium", num_envs=4, batch_size=4)
        pool.async_reset()
        pool.recv()
        pool.send(np.ones(4, dtype=np.int32))
        pool.recv()
        pool.send(np.ones(4, dtype=np.int32), env_id=np.arange(4))
        pool.recv()
        pool.send({"action": np.ones(4, dtype=np.int32), "env_id": np.arange(4, dtype=np.int32)})
        assert pool.recv()[0].shape == (4, 4)

    def test_make_spec_matches_make(self):
        spec = self.envpool.make_spec("CartPole-v1")
        env = self.envpool.make("CartPole-v1", env_type="gymnasium", num_envs=2)
        assert spec.observation_space == env.observation_space
        assert MultiThreadedEnv(2, "CartPole-v1").observation_spec["observation"].shape == (2, 4)

    def test_render_keeps_batch_dim(self):
        """004: even a single env render keeps the batch dimension: (1, H, W, 3)."""
        env = MultiThreadedEnv(1, "CartPole-v1", render_mode="rgb_array")
        env.reset()
        frames = env.render()
        assert frames.shape[0] == 1 and frames.shape[-1] == 3 and frames.dtype == torch.uint8
