"""Envs whose agents have different action/observation shapes, stacked lazily."""

from __future__ import annotations

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict

from rl_envs_core import EnvBase
from rl_specs import Bounded, Categorical, Composite, Unbounded


class TwoShapedAgents(EnvBase):
    """Two agents: one acts with 3 numbers, one with 2; each sees its own action sum."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        sizes = (3, 2)
        self.full_action_spec_unbatched = Composite(
            agents=torch.stack(
                [Composite(action=Bounded(-1, 1, shape=(n,))) for n in sizes], dim=0
            )
        )
        self.full_observation_spec_unbatched = Composite(
            agents=torch.stack(
                [Composite(obs=Unbounded(shape=(n,)), total=Unbounded(shape=(1,))) for n in sizes],
                dim=0,
            )
        )
        self.full_done_spec_unbatched = Composite(
            done=Categorical(2, shape=(1,), dtype=torch.bool),
            terminated=Categorical(2, shape=(1,), dtype=torch.bool),
        )
        self.full_reward_spec_unbatched = Composite(reward=Unbounded(shape=(1,)))
        self.sizes = sizes

    def _reset(self, tensordict=None):
        out = self.full_observation_spec.zero()
        out.update(self.full_done_spec.zero())
        return out

    def _step(self, tensordict):
        agents = tensordict["agents"]
        members = [
            TensorDict(
                {"obs": agents[..., i]["action"], "total": agents[..., i]["action"].sum(-1, True)},
                batch_size=self.batch_size,
            )
            for i in range(len(self.sizes))
        ]
        out = TensorDict(
            {"agents": LazyStackedTensorDict.lazy_stack(members, len(self.batch_size))},
            batch_size=self.batch_size,
        )
        out.update(self.full_done_spec.zero())
        out.update(self.full_reward_spec.zero())
        return out

    def _set_seed(self, seed):
        torch.manual_seed(seed)


@pytest.mark.parametrize("batch_size", [(), (4,)])
def test_rand_step_draws_one_action_per_agent_shape(batch_size):
    env = TwoShapedAgents(batch_size=batch_size)
    data = env.rand_step(env.reset())
    agents = data["agents"]
    assert isinstance(agents, LazyStackedTensorDict)
    dim = len(batch_size)
    assert [agents[(slice(None),) * dim + (i,)]["action"].shape[-1] for i in range(2)] == [3, 2]
    obs = data["next", "agents"]
    assert [obs[(slice(None),) * dim + (i,)]["obs"].shape[-1] for i in range(2)] == [3, 2]


@pytest.mark.parametrize("batch_size", [(), (2,)])
def test_rollout_of_heterogeneous_agents_stays_lazy(batch_size):
    env = TwoShapedAgents(batch_size=batch_size)
    data = env.rollout(3, return_contiguous=False)
    assert data.batch_size == (*batch_size, 3)
    first = data[..., 0]["agents"]
    assert first.shape == (*batch_size, 2)
