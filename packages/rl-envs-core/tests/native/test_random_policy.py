"""RandomPolicy: random actions drawn from an action spec."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs_core._native._pendulum import PendulumEnv
from rl_envs_core._native._random_policy import RandomPolicy
from rl_specs import Bounded, Categorical, Composite


class TestRandomPolicy:
    def test_writes_action_in_bounds(self):
        policy = RandomPolicy(Bounded(-torch.ones(3), torch.ones(3)))
        td = policy(TensorDict())
        assert td["action"].shape == torch.Size([3])
        assert td["action"].abs().le(1).all()

    def test_actions_vary(self):
        policy = RandomPolicy(Bounded(-1.0, 1.0, shape=(16,)))
        assert not torch.equal(policy(TensorDict())["action"], policy(TensorDict())["action"])

    def test_custom_action_key(self):
        policy = RandomPolicy(Categorical(4, shape=(2,)), action_key=("agent", "act"))
        td = policy(TensorDict())
        assert td["agent", "act"].shape == torch.Size([2])
        assert td["agent", "act"].lt(4).all()

    def test_composite_spec_writes_every_entry(self):
        spec = Composite(
            {("agents", "action"): Categorical(3, shape=(2, 1)), "gripper": Bounded(0.0, 1.0, shape=(1,))}
        )
        td = RandomPolicy(spec)(TensorDict())
        assert td["agents", "action"].shape == torch.Size([2, 1])
        assert td["gripper"].shape == torch.Size([1])
        assert "action" not in td.keys()

    def test_spec_is_cloned(self):
        spec = Bounded(-1.0, 1.0, shape=(2,))
        policy = RandomPolicy(spec)
        assert policy.action_spec is not spec
        assert policy.action_spec == spec

    def test_drives_a_rollout(self):
        env = PendulumEnv(seed=0)
        data = env.rollout(5, policy=RandomPolicy(env.action_spec))
        assert data["action"].shape == torch.Size([5, 1])
        assert data["action"].abs().le(2.0).all()

    def test_non_spec_raises(self):
        with pytest.raises(TypeError, match=r"expected a TensorSpec.*env.action_spec"):
            RandomPolicy(torch.zeros(3))
