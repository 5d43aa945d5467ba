"""A sub-env's ``_step`` sees the previous step's observations, as in a plain env."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_batched_envs import ParallelEnv, SerialEnv
from rl_envs_core import EnvBase, check_env_specs, step_mdp
from rl_specs import Categorical, Composite, Unbounded


class Tally(EnvBase):
    """Keeps no state of its own: the next tally is the one it reads from its input."""

    def __init__(self, limit=3):
        super().__init__()
        self.limit = limit
        self.observation_spec = Composite(tally=Unbounded((1,), dtype=torch.int64))
        self.action_spec = Categorical(2)
        self.reward_spec = Unbounded((1,))

    def _reset(self, tensordict):
        return TensorDict({"tally": torch.zeros(1, dtype=torch.int64)}, [])

    def _step(self, tensordict):
        tally = tensordict["tally"] + 1 + tensordict["action"].reshape(1)
        done = tally >= self.limit
        return TensorDict(
            {"tally": tally, "reward": torch.ones(1), "done": done, "terminated": done}, []
        )

    def _set_seed(self, seed):
        return seed


@pytest.fixture(
    params=[(SerialEnv, True), (SerialEnv, False), (ParallelEnv, True), (ParallelEnv, False)]
)
def make(request):
    cls, use_buffers = request.param
    envs = []

    def build(n=2, **kwargs):
        env = cls(n, Tally, kwargs, use_buffers=use_buffers)
        envs.append(env)
        return env

    yield build
    for env in envs:
        env.close(raise_if_closed=False)


def test_an_env_reading_its_last_observation_runs_batched(make):
    env = make(limit=3)
    check_env_specs(env)
    zeros = env.full_action_spec.zero()
    data = env.rollout(7, lambda td: td.update(zeros), break_when_any_done=False)
    assert data["next", "tally"].squeeze(-1).tolist() == [[1, 2, 3, 1, 2, 3, 1]] * 2


def test_step_then_step_and_maybe_reset_use_the_given_observations(make):
    env = make(limit=4)
    td = env.reset()
    td.update(env.full_action_spec.zero())
    td = step_mdp(env.step(td))  # tally 1
    td["tally"] = torch.tensor([[2], [0]])  # data the caller edited
    td.update(env.full_action_spec.zero())
    out, root = env.step_and_maybe_reset(td)
    assert out["next", "tally"].squeeze(-1).tolist() == [3, 1]
    td = root.update(env.full_action_spec.zero())
    out, root = env.step_and_maybe_reset(td)
    assert out["next", "tally"].squeeze(-1).tolist() == [4, 2]
    assert root["tally"].squeeze(-1).tolist() == [0, 2]  # env 0 ended and was reset


def test_a_view_steps_from_its_observations(make):
    env = make(n=3, limit=10)
    env.reset()
    view = env[[2, 0]]
    td = TensorDict({"tally": torch.tensor([[5], [7]]), "action": torch.tensor([1, 0])}, [2])
    assert view.step(td)["next", "tally"].squeeze(-1).tolist() == [7, 8]


class Scribbler(Tally):
    """Replaces and adds entries of its own input before stepping (its input is its own)."""

    def _step(self, tensordict):
        out = super()._step(tensordict)
        tensordict["tally"] = torch.full((1,), 100, dtype=torch.int64)  # replaced
        tensordict["scratch"] = torch.ones(1)  # added
        return out


def test_a_sub_env_editing_its_input_leaves_the_batch_untouched():
    env = SerialEnv(2, Scribbler, {"limit": 10}, use_buffers=True)
    try:
        zeros = env.full_action_spec.zero()
        data = env.rollout(3, lambda td: td.update(zeros), break_when_any_done=False)
        # each step read the previous tally (1, 2, 3), never the 100 the env wrote
        assert data["next", "tally"].squeeze(-1).tolist() == [[1, 2, 3]] * 2
        assert data["tally"].squeeze(-1).tolist() == [[0, 1, 2]] * 2
        assert "scratch" not in data.keys()
    finally:
        env.close()
