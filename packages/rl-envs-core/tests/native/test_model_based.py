"""ModelBasedEnvBase: stepping through a world model."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential
from torch import nn

from rl_envs_core._native._model_based import ModelBasedEnvBase
from rl_envs_core.testing import EnvContract
from rl_specs import Bounded, Composite, Unbounded


class LinearMBEnv(ModelBasedEnvBase):
    def __init__(self, world_model, **kwargs):
        super().__init__(world_model, **kwargs)
        batch = tuple(self.batch_size)
        self.observation_spec = Composite(hidden=Unbounded((*batch, 4)), shape=batch)
        self.state_spec = Composite(hidden=Unbounded((*batch, 4)), shape=batch)
        self.action_spec = Bounded(-1.0, 1.0, shape=(*batch, 4))
        self.reward_spec = Unbounded((*batch, 1))

    def _reset(self, tensordict=None):
        return TensorDict(hidden=torch.ones(*self.batch_size, 4), batch_size=self.batch_size)


class Dynamics(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 4)

    def forward(self, hidden, action):
        return self.linear(torch.cat([hidden, action], -1))


def _world_model():
    dynamics = Dynamics()
    reward = nn.Linear(4, 1)
    for layer in (dynamics.linear, reward):
        nn.init.constant_(layer.weight, 0.5)
        nn.init.zeros_(layer.bias)
    model = TensorDictSequential(
        TensorDictModule(dynamics, in_keys=["hidden", "action"], out_keys=["hidden"]),
        TensorDictModule(reward, in_keys=["hidden"], out_keys=["reward"]),
        TensorDictModule(lambda h: h.abs(), in_keys=["hidden"], out_keys=["extra"]),
    )
    return model, dynamics


class TestModelBasedEnvBase(EnvContract):
    def make_env(self):
        return LinearMBEnv(_world_model()[0], batch_size=[2])

    def test_step_runs_world_model(self):
        model, _ = _world_model()
        env = LinearMBEnv(model)
        td = env.reset()
        td["action"] = torch.zeros(4)
        out = env.step(td)["next"]
        assert out["hidden"].tolist() == [2.0] * 4
        assert out["reward"].tolist() == [4.0]

    def test_step_keeps_only_declared_outputs_and_input(self):
        model, _ = _world_model()
        env = LinearMBEnv(model)
        td = env.reset()
        td["action"] = torch.zeros(4)
        out = env.step(td)
        assert "extra" not in out["next"].keys()
        assert out["hidden"].tolist() == [1.0] * 4

    def test_functional_params(self):
        model, dynamics = _world_model()
        params = {name: torch.zeros_like(p) for name, p in model.named_parameters()}
        env = LinearMBEnv(model, params=params)
        td = env.reset()
        td["action"] = torch.ones(4)
        assert env.step(td)["next", "hidden"].tolist() == [0.0] * 4
        assert dynamics.linear.weight.eq(0.5).all()

    def test_functional_params_from_tensordict(self):
        model, _ = _world_model()
        params = TensorDict.from_module(model).apply(torch.zeros_like)
        env = LinearMBEnv(model, params=params)
        td = env.reset()
        td["action"] = torch.ones(4)
        assert env.step(td)["next", "reward"].tolist() == [0.0]

    def test_batched_rollout(self):
        model, _ = _world_model()
        env = LinearMBEnv(model, batch_size=[3])
        data = env.rollout(5)
        assert data.batch_size == torch.Size([3, 5])
        assert env.batch_locked is False

    def test_set_specs_from_env(self):
        model, _ = _world_model()
        source = LinearMBEnv(model)
        target = LinearMBEnv(model)
        target.action_spec = Bounded(-2.0, 2.0, shape=(4,))
        target.set_specs_from_env(source)
        assert target.action_spec == source.action_spec
        assert target.state_spec == source.state_spec

    def test_set_seed_warns(self):
        model, _ = _world_model()
        with pytest.warns(UserWarning, match=r"does nothing.*torch.manual_seed"):
            LinearMBEnv(model).set_seed(0)

    def test_world_model_must_be_module(self):
        with pytest.raises(TypeError, match=r"nn.Module.*TensorDictModule"):
            LinearMBEnv(lambda td: td)

    def test_check_env_specs(self):
        from rl_envs_core import check_env_specs

        model, _ = _world_model()
        check_env_specs(LinearMBEnv(model, batch_size=[2]))
