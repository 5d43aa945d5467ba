"""Version shims: the legacy gym API (4-tuple steps, reset without info, seed())."""

from __future__ import annotations

import numpy as np
import pytest

from rl_env_adapters import _compat

gym = pytest.importorskip("gymnasium")


class LegacyEnv:
    """An env following gym < 0.26: reset() -> obs, step() -> (obs, reward, done, info)."""

    def __init__(self):
        self.observation_space = gym.spaces.Box(-10, 10, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0
        self.seeded = None

    def seed(self, seed=None):
        self.seeded = seed

    def reset(self):
        self.t = 0
        return np.zeros(1, np.float32)

    def step(self, action):
        self.t += 1
        return np.full(1, self.t, np.float32), 1.0, self.t >= 2, {}


class TestCompat:
    def test_legacy_step_is_normalised_once_by_the_template(self):
        from rl_env_adapters import GymWrapper

        env = GymWrapper(LegacyEnv())
        assert env._output_transform(("o", 1.0, True, {})) == ("o", 1.0, None, None, True, {})
        assert env._reset_output_transform("obs") == ("obs", {})
        assert env._reset_output_transform(("obs", {"a": 1})) == ("obs", {"a": 1})

    def test_step_result_of_bad_length_raises(self):
        from rl_env_adapters import GymWrapper

        env = GymWrapper(LegacyEnv())
        env.reset()
        env._env.step = lambda action: (1, 2, 3)
        with pytest.raises(ValueError, match="got 3"):
            env.rand_step()

    def test_seed_falls_back_to_seed_method(self):
        env = LegacyEnv()
        _compat.seed_env(env, 4)
        assert env.seeded == 4

    @pytest.mark.parametrize(
        ("metadata", "mode"),
        [({}, _compat.NEXT_STEP), ({"autoreset_mode": "same_step"}, _compat.SAME_STEP)],
    )
    def test_autoreset_mode(self, metadata, mode):
        env = type("V", (), {"metadata": metadata})()
        assert _compat.autoreset_mode(env) == mode

    def test_legacy_env_through_gym_wrapper(self):
        from rl_env_adapters import GymWrapper

        env = GymWrapper(LegacyEnv())
        env.set_seed(1)
        data = env.rollout(5)
        assert data.batch_size == (2,)
        assert data["next", "terminated"][-1].item() and not data["next", "truncated"][-1].item()
