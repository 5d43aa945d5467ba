"""GymLikeEnv: the read_* plumbing and output transforms, on a tiny fake backend."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rl_envs_core import GymLikeEnv, check_env_specs
from rl_specs import Bounded, Composite, Unbounded


class FakeBackend:
    """A gymnasium-like env: x moves by the action; terminated at x >= 2; truncated at 5 steps."""

    def __init__(self, legacy=False, dict_obs=False):
        self.legacy = legacy
        self.dict_obs = dict_obs
        self.seeds = []
        self.closed = False
        self.answer = 42

    def _obs(self):
        obs = np.array([self.x], dtype=np.float64)
        return {"state": obs, "extra": np.int64(self.t)} if self.dict_obs else obs

    def reset(self, seed=None):
        self.seeds.append(seed)
        self.x, self.t = 0.0, 0
        return self._obs(), {"steps": 0}

    def step(self, action):
        assert isinstance(action, np.ndarray)
        self.x += float(action[0])
        self.t += 1
        info = {"steps": self.t}
        if self.legacy:
            return self._obs(), 1.0, self.x >= 2, info
        return self._obs(), 1.0, self.x >= 2, self.t >= 5, info

    def close(self):
        self.closed = True


class FakeWrapper(GymLikeEnv):
    def _make_specs(self, env):
        obs = {"observation": Unbounded(shape=(1,))}
        if env.dict_obs:
            obs["extra"] = Unbounded(shape=(), dtype=torch.int64)
        self.observation_spec = Composite(obs)
        self.action_spec = Bounded(low=-1.0, high=1.0, shape=(1,))
        self.add_truncated_keys()  # the backend reports truncation: declare it


def _policy(value):
    return lambda td: td.set("action", torch.full((1,), value))


class TestGymLikeEnv:
    def test_rollout_reads_backend_outputs(self):
        env = FakeWrapper(env=FakeBackend())
        data = env.rollout(10, _policy(1.0))
        assert data["next", "observation"].squeeze(-1).tolist() == [1.0, 2.0]
        assert data["next", "observation"].dtype == torch.float32
        assert data["next", "terminated"].squeeze(-1).tolist() == [False, True]
        assert data["next", "reward"].squeeze(-1).tolist() == [1.0, 1.0]

    def test_truncation_sets_done(self):
        env = FakeWrapper(env=FakeBackend())
        data = env.rollout(10, _policy(0.1))
        assert data.shape[-1] == 5
        last = data[-1]["next"]
        assert last["truncated"].item() and last["done"].item() and not last["terminated"].item()

    def test_legacy_four_tuple(self):
        env = FakeWrapper(env=FakeBackend(legacy=True))
        data = env.rollout(10, _policy(1.0))
        assert data["next", "done"].squeeze(-1).tolist() == [False, True]
        assert torch.equal(data["next", "terminated"], data["next", "done"])

    def test_dict_observations_and_state_renaming(self):
        env = FakeWrapper(env=FakeBackend(dict_obs=True))
        data = env.rollout(2, _policy(0.5))
        assert data["next", "extra"].tolist() == [1, 2]
        check_env_specs(env)

    def test_frame_skip_sums_rewards(self):
        env = FakeWrapper(env=FakeBackend(), frame_skip=2)
        data = env.rollout(1, _policy(0.5))
        assert data["next", "reward"].item() == 2.0
        assert data["next", "observation"].item() == 1.0

    def test_frame_skip_stops_at_done(self):
        env = FakeWrapper(env=FakeBackend(), frame_skip=3)
        data = env.rollout(1, _policy(1.0))
        assert data["next", "reward"].item() == 2.0

    def test_info_dict_reader(self):
        class StepsReader:
            info_spec = Composite(steps=Unbounded(shape=(), dtype=torch.int64))

            def __call__(self, info, td):
                return td.set("steps", torch.tensor(info["steps"]))

        env = FakeWrapper(env=FakeBackend())
        env.set_info_dict_reader(StepsReader())
        assert len(env.info_dict_reader) == 1
        assert "steps" in env.observation_keys
        check_env_specs(env)
        assert env.reset()["steps"].item() == 0
        assert env.rand_step(env.reset())["next", "steps"].item() == 1

    def test_non_callable_info_reader_raises(self):
        with pytest.raises(TypeError, match="expected a callable reader"):
            FakeWrapper(env=FakeBackend()).set_info_dict_reader(3)

    def test_seed_close_and_attribute_forwarding(self):
        backend = FakeBackend()
        env = FakeWrapper(env=backend)
        env.set_seed(3)
        assert backend.seeds[-1] == 3
        assert env.answer == 42
        env.close()
        assert backend.closed and env.is_closed

    def test_missing_backend_raises(self):
        with pytest.raises(TypeError, match="needs a backend: pass env="):
            FakeWrapper()

    def test_build_env_hook(self):
        class Built(FakeWrapper):
            def _build_env(self, legacy=False):
                return FakeBackend(legacy=legacy)

        assert Built(legacy=True)._env.legacy

    def test_bad_step_tuple_raises(self):
        env = FakeWrapper(env=FakeBackend())
        with pytest.raises(ValueError, match="expected the backend step to return 5 values"):
            env._output_transform((1, 2))

    def test_reset_returning_only_observations(self):
        class ObsOnly(FakeBackend):
            def reset(self, seed=None):
                return super().reset(seed)[0]

        env = FakeWrapper(env=ObsOnly())
        assert env.reset()["observation"].tolist() == [0.0]

    def test_actions_as_tensors_when_not_converted(self):
        env = FakeWrapper(env=FakeBackend(), convert_actions_to_numpy=False)
        action = torch.ones(1)
        assert env.read_action(action) is action


class TestReadPlan:
    """The readers' spec lookups are cached per version of the specs."""

    def test_python_flags_match_the_tensor_path(self):
        env = FakeWrapper(env=FakeBackend())
        for terminated, truncated in [(True, False), (False, False), (False, True)]:
            fast = env.read_done(terminated, truncated)
            slow = env.read_done(np.bool_(terminated), np.bool_(truncated))
            assert torch.equal(fast[2], slow[2]) and fast[3] == slow[3]
            assert fast[2].dtype == torch.bool and fast[2].shape == ()

    def test_a_new_spec_is_read_at_the_next_step(self):
        env = FakeWrapper(env=FakeBackend())
        env.rand_step(env.reset())
        env.observation_spec = Composite(observation=Unbounded(shape=(1,), dtype=torch.float64))
        assert env.rand_step(env.reset())["next", "observation"].dtype == torch.float64

    def test_unlocked_specs_are_read_each_time(self):
        env = FakeWrapper(env=FakeBackend(), spec_locked=False)
        env.rand_step(env.reset())
        env.full_observation_spec["observation"] = Unbounded(shape=(1,), dtype=torch.float64)
        assert env.read_obs(np.zeros(1))["observation"].dtype == torch.float64

    def test_several_rewards_need_their_own_reader(self):
        env = FakeWrapper(env=FakeBackend())
        env.reward_spec = Composite(a=Unbounded(shape=(1,)), b=Unbounded(shape=(1,)))
        assert env.read_obs(np.zeros(1))["observation"].shape == (1,)
        with pytest.raises(KeyError, match="exactly one reward"):
            env.read_reward(1.0)


class TestStepTemplate:
    def test_a_subclass_fills_one_stage_and_keeps_the_others(self):
        class Doubled(FakeWrapper):
            def read_action(self, action):  # the action stage, filled by the subclass
                return super().read_action(action * 2)

        data = Doubled(env=FakeBackend()).rollout(1, _policy(0.5))
        assert data["next", "observation"].item() == 1.0  # moved by 2 * 0.5

    def test_frame_skip_normalises_every_legacy_result(self):
        env = FakeWrapper(env=FakeBackend(legacy=True), frame_skip=3)
        data = env.rollout(1, _policy(0.5))
        # three 4-value results read: rewards summed, done read as terminated
        assert data["next", "reward"].item() == 3.0
        assert data["next", "observation"].item() == 1.5
        assert not data["next", "done"].item()
        stopped = env.rollout(1, _policy(1.0))  # x >= 2 after two steps: the third is skipped
        assert stopped["next", "reward"].item() == 2.0 and stopped["next", "terminated"].item()
