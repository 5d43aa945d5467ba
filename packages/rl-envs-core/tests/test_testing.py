"""rl_envs_core.testing: CountingEnv, and the EnvContract run on the envs of this package."""

from __future__ import annotations

import pytest
import torch

from rl_envs_core import EnvBase
from rl_envs_core.testing import CountingEnv, EnvContract, assert_close_nan
from rl_specs import Categorical, Composite, Unbounded


class TestCountingEnv(EnvContract):
    def make_env(self):
        return CountingEnv(max_steps=3)

    def test_counts_and_terminates(self):
        data = CountingEnv(max_steps=3).rollout(10)
        assert data["next", "observation"].squeeze(-1).tolist() == [1.0, 2.0, 3.0]
        assert data["next", "terminated"].squeeze(-1).tolist() == [False, False, True]


class TestBatchedCountingEnv(EnvContract):
    rollout_steps = 7

    def make_env(self):
        return CountingEnv(max_steps=3, batch_size=[2, 3])


class TestAutoResetCountingEnv(EnvContract):
    def make_env(self):
        return CountingEnv(max_steps=2, auto_reset=True)


class MarlEnv(EnvBase):
    """Two agents in an 'agents' group; a shared done at the root."""

    def __init__(self, n_agents=2, batch_size=(3,)):
        super().__init__(batch_size=batch_size)
        b = tuple(self.batch_size)
        group = (*b, n_agents)
        self.full_observation_spec = Composite(
            agents=Composite(observation=Unbounded(shape=(*group, 2)), shape=group), shape=b
        )
        self.full_action_spec = Composite(
            agents=Composite(action=Categorical(3, shape=(*group, 1)), shape=group), shape=b
        )
        self.full_reward_spec = Composite(
            agents=Composite(reward=Unbounded(shape=(*group, 1)), shape=group), shape=b
        )
        self.done_spec = Categorical(2, shape=(*b, 1), dtype=torch.bool)
        self.t = 0

    def _obs(self):
        return self.full_observation_spec.zero() + self.t

    def _reset(self, tensordict=None, **kwargs):
        self.t = 0
        return self._obs()

    def _step(self, tensordict):
        self.t += 1
        out = self._obs()
        out[("agents", "reward")] = tensordict["agents", "action"].float()
        out["done"] = torch.full((*self.batch_size, 1), self.t >= 4)
        return out

    def _set_seed(self, seed):
        pass


class TestMarlEnv(EnvContract):
    def make_env(self):
        return MarlEnv()

    def test_keys_are_nested(self):
        env = self.make_env()
        assert env.action_key == ("agents", "action")
        assert env.reward_key == ("agents", "reward")
        assert env.done_keys == ["done", "terminated"]
        data = env.rollout(10)
        assert data["agents", "action"].shape == torch.Size([3, 4, 2, 1])
        assert data.shape == torch.Size([3, 4])


class TestEnvContract:
    def test_make_env_is_required(self):
        with pytest.raises(NotImplementedError, match="must define make_env"):
            EnvContract().make_env()

    def test_contract_catches_a_broken_env(self):
        class Leaky(CountingEnv):
            def _reset(self, tensordict=None, **kwargs):
                return super()._reset(tensordict).exclude("observation")

        class Contract(EnvContract):
            def make_env(self):
                return Leaky()

        with pytest.raises(AssertionError):
            Contract().test_reset_matches_specs()

    def test_assert_close_nan(self):
        a = CountingEnv().fake_tensordict()
        b = a.clone()
        a["observation"] = torch.full((1,), float("nan"))
        b["observation"] = torch.full((1,), float("nan"))
        assert_close_nan(a, b)
        b["observation"] = torch.zeros(1)
        with pytest.raises(AssertionError):
            assert_close_nan(a, b)
