"""TrajCounter."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs_core import check_env_specs, step_mdp
from rl_transforms import StepCounter, TrajCounter, TransformedEnv


class TestTrajCounter:
    def test_numbers_trajectories(self, counting_env):
        env = TransformedEnv(counting_env(max_steps=100), StepCounter(3))
        env.append_transform(TrajCounter())
        data = env.rollout(9, break_when_any_done=False)
        assert data["next", "traj_count"].squeeze(-1).tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]

    def test_batched_partial_resets_draw_new_numbers(self, counting_env):
        env = TransformedEnv(counting_env(max_steps=100, batch_size=[2]), TrajCounter())
        td = env.reset()
        assert td["traj_count"].squeeze(-1).tolist() == [0, 1]
        td = step_mdp(env.rand_step(td))
        td.set("_reset", torch.tensor([[False], [True]]))
        assert env.reset(td)["traj_count"].squeeze(-1).tolist() == [0, 2]

    def test_clones_share_the_counter(self, counting_env):
        t = TrajCounter()
        a = TransformedEnv(counting_env(), t)
        b = TransformedEnv(counting_env(), t.clone())
        assert [
            a.reset()["traj_count"].item(),
            b.reset()["traj_count"].item(),
            a.reset()["traj_count"].item(),
        ] == [0, 1, 2]
        assert t._counter.is_shared()

    def test_step_without_reset_raises(self):
        with pytest.raises(KeyError, match=r"TrajCounter expected 'traj_count' in the step input"):
            TrajCounter()._step(TensorDict(), TensorDict())

    def test_forward_raises(self):
        with pytest.raises(RuntimeError, match=r"TrajCounter numbers trajectories"):
            TrajCounter()(TensorDict())

    def test_check_env_specs(self, counting_env):
        env = TransformedEnv(counting_env(batch_size=[2]), TrajCounter())
        assert "traj_count" in env.full_state_spec.keys()
        check_env_specs(env)
