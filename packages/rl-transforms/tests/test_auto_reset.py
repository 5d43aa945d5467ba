"""AutoResetTransform and AutoResetEnv."""

from __future__ import annotations

import math

import pytest
import torch
from tensordict import TensorDict

from rl_envs_core import check_env_specs
from rl_envs_core.extension import CarryOverAutoReset
from rl_transforms import AutoResetEnv, AutoResetTransform, Compose, StepCounter, TransformedEnv


class TestAutoResetTransform:
    def test_replaces_and_saves_post_done_observation(self):
        t = AutoResetTransform()
        nxt = TensorDict(
            {
                "observation": torch.tensor([[5.0], [7.0]]),
                "count": torch.tensor([[1], [2]]),
                "done": torch.tensor([[True], [False]]),
            },
            [2],
        )
        out = t._step(TensorDict({}, [2]), nxt)
        assert math.isnan(out["observation"][0].item()) and out["observation"][1].item() == 7.0
        assert out["count"].squeeze(-1).tolist() == [-1, 2]
        assert t.pop_saved()["observation"].squeeze(-1).tolist() == [5.0, 7.0]
        assert t.pop_saved() is None

    def test_no_replace(self):
        t = AutoResetTransform(replace=False, fill_float=0.0)
        out = t._step(
            TensorDict(),
            TensorDict({"observation": torch.tensor([5.0]), "done": torch.tensor([True])}),
        )
        assert out["observation"].item() == 5.0 and t.saved is not None

    def test_nested_done_level_masks_only_its_own_entries(self):
        t = AutoResetTransform()
        t._lazy["done_levels"] = {(): ["done"], ("agent",): [("agent", "done")]}
        t._lazy["skipped"] = ["done", ("agent", "done")]
        nxt = TensorDict(
            {
                "observation": torch.tensor([1.0]),
                "done": torch.tensor([False]),
                "agent": {"obs": torch.tensor([2.0]), "done": torch.tensor([True])},
            },
            [],
        )
        out = t._step(TensorDict(), nxt)
        assert out["observation"].item() == 1.0 and math.isnan(out["agent", "obs"].item())

    def test_forward_raises(self):
        with pytest.raises(RuntimeError, match=r"AutoResetTransform handles the resets"):
            AutoResetTransform()(TensorDict())


class TestAutoResetEnv:
    def test_reset_uses_saved_observation(self, self_resetting_env):
        base = self_resetting_env(max_steps=3)
        env = AutoResetEnv(base, AutoResetTransform())
        data = env.rollout(7, break_when_any_done=False)
        nxt = data["next", "observation"].squeeze(-1)
        assert nxt[:2].tolist() == [1.0, 2.0] and math.isnan(nxt[2].item())
        assert data["observation"].squeeze(-1).tolist() == [0.0, 1.0, 2.0, 0.0, 1.0, 2.0, 0.0]
        assert base.resets == 1

    def test_other_transforms_follow(self, self_resetting_env):
        env = AutoResetEnv(
            self_resetting_env(max_steps=2), Compose(AutoResetTransform(), StepCounter())
        )
        data = env.rollout(4, break_when_any_done=False)
        assert data["step_count"].squeeze(-1).tolist() == [0, 1, 0, 1]

    def test_first_transform_must_be_auto_reset(self, self_resetting_env):
        with pytest.raises(
            TypeError, match=r"AutoResetEnv expected an AutoResetTransform as first transform"
        ):
            AutoResetEnv(self_resetting_env(), StepCounter())

    def test_is_a_transformed_env(self, self_resetting_env):
        assert isinstance(AutoResetEnv(self_resetting_env()), TransformedEnv)

    def test_check_env_specs(self, self_resetting_env):
        check_env_specs(AutoResetEnv(self_resetting_env(max_steps=10)))


class TestEnvBaseAutoReset:
    def test_env_base_auto_reset_and_the_transform_share_one_engine(self, self_resetting_env):
        base = self_resetting_env(max_steps=3, auto_reset=True)
        assert type(base.auto_reset_handler) is CarryOverAutoReset
        assert type(AutoResetTransform()._carry) is CarryOverAutoReset
        data = base.rollout(7, break_when_any_done=False)
        nxt = data["next", "observation"].squeeze(-1)
        assert math.isnan(nxt[2].item()) and nxt[3].item() == 1.0
        assert data["observation"].squeeze(-1).tolist() == [0.0, 1.0, 2.0, 0.0, 1.0, 2.0, 0.0]
        assert base.resets == 1

    def test_replace_false_keeps_observations(self, self_resetting_env):
        base = self_resetting_env(max_steps=2, auto_reset=True, auto_reset_replace=False)
        nxt = base.rollout(4, break_when_any_done=False)["next", "observation"].squeeze(-1)
        assert nxt.tolist() == [1.0, 0.0, 1.0, 0.0]
