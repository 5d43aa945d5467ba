"""The seeds' MultiStep and trees examples (002: data_13, data_19..data_22), on rl_stack.data.

Pseudocode of the seed (``storage[td]``, ``forest.node_map[data]``) is filled in with a
small TED collected from a gymnasium env; the calls are the seed's.
"""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_stack.data import LazyTensorStorage, MCTSForest, MultiStep
from rl_stack.data.map import QueryModule, TensorDictMap
from rl_stack.data.postprocs import MultiStep as MultiStepPostproc
from rl_stack.envs import GymEnv

pytest.importorskip("gymnasium")


@pytest.fixture
def rollout():
    env = GymEnv("CartPole-v1")
    env.set_seed(0)
    torch.manual_seed(0)
    try:
        yield env.rollout(30, break_when_any_done=False)
    finally:
        env.close()


def test_multistep_breaks_the_ted_check(rollout):
    # 002, "Multi-step" (data_13): after MultiStep the next observation is n steps ahead
    data = rollout
    assert MultiStep is MultiStepPostproc
    done = data["next", "done"].squeeze(-1)
    keep = ~done.cumsum(0).bool()  # the steps of the first trajectory: the TED check holds
    data = data[keep]
    assert (data[..., 1:]["observation"] == data[..., :-1]["next", "observation"]).all()
    data = MultiStep(gamma=0.99, n_steps=3)(data)
    assert not (data[..., 1:]["observation"] == data[..., :-1]["next", "observation"]).all()


def test_tensordict_map_query_and_write(rollout):
    # 002, "TensorDictMap" (data_19, data_20)
    observation, action = rollout["observation"], rollout["action"]
    next_state = rollout["next"].select("observation", "reward")
    storage = TensorDictMap(
        query_module=QueryModule(in_keys=["observation", "action"]),
        storage=LazyTensorStorage(1000),
    )
    td = TensorDict(observation=observation, action=action, batch_size=rollout.batch_size)
    storage[td] = next_state
    next_td = storage[td]
    assert (next_td["observation"] == next_state["observation"]).all()


def test_forest_node_and_data_maps(rollout):
    # 002, "MCTSForest" (data_21, data_22)
    forest = MCTSForest()
    forest.extend(rollout)
    observation = rollout["observation"][0]
    data = TensorDict(observation=observation)
    metadata = forest.node_map[data]
    index = metadata["_index"]
    next_data = forest.data_map[index]
    assert next_data.shape == index.shape
    assert (next_data["next", "observation"][0] == rollout["next", "observation"][0]).all()
    tree = forest.get_tree(rollout[0])  # one trajectory: the root holds its steps
    assert (tree.rollout["action"][0] == rollout["action"][0]).all()
