"""RenameTransform, SelectTransform, ExcludeTransform, RemoveEmptySpecs."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs_core import check_env_specs
from rl_specs import Composite
from rl_transforms import (
    ExcludeTransform,
    RemoveEmptySpecs,
    RenameTransform,
    SelectTransform,
    TransformedEnv,
)


class TestRenameTransform:
    @pytest.mark.parametrize("create_copy", [True, False])
    def test_renamed_action_with_and_without_copy(self, continuous_env, create_copy):
        t = RenameTransform(
            [],
            [],
            in_keys_inv=["action"],
            out_keys_inv=[("renamed", "action")],
            create_copy=create_copy,
        )
        env = TransformedEnv(continuous_env(), t)
        assert ("renamed", "action") in env.action_keys
        assert ("action" in env.action_keys) is create_copy
        data = env.rollout(2)
        assert ("renamed", "action") in data.keys(True)
        assert ("action" in data.keys()) is create_copy

    def test_renames_output(self, counting_env):
        env = TransformedEnv(counting_env(), RenameTransform(["observation"], ["obs"]))
        data = env.rollout(2)
        assert "obs" in data["next"].keys() and "observation" not in data["next"].keys()
        assert set(env.observation_spec.keys()) == {"obs"}

    def test_create_copy_keeps_original(self, counting_env):
        env = TransformedEnv(
            counting_env(), RenameTransform(["observation"], ["obs"], create_copy=True)
        )
        assert {"obs", "observation"} <= set(env.reset().keys())

    def test_inverse_keys_rename_the_action(self, continuous_env):
        base = continuous_env()
        env = TransformedEnv(
            base, RenameTransform([], [], in_keys_inv=["action"], out_keys_inv=["act"])
        )
        assert env.action_keys == ["act"]
        env.rollout(2)
        assert base.last_action is not None and base.last_action.shape == torch.Size([2])

    def test_nested_keys(self):
        t = RenameTransform([("a", "b")], [("c", "d")])
        out = t(TensorDict({("a", "b"): torch.zeros(1)}))
        assert ("c", "d") in out.keys(True, True) and ("a", "b") not in out.keys(True, True)

    def test_missing_key_raises(self):
        with pytest.raises(KeyError, match=r"RenameTransform expected the entry 'x'"):
            RenameTransform(["x"], ["y"])(TensorDict({"a": torch.zeros(1)}))

    def test_missing_inverse_key_raises(self):
        with pytest.raises(
            KeyError, match=r"RenameTransform expected the entry 'act'.*out_keys_inv"
        ):
            RenameTransform([], [], in_keys_inv=["action"], out_keys_inv=["act"]).inv(TensorDict())

    def test_length_mismatch_raises(self):
        with pytest.raises(
            ValueError, match=r"RenameTransform expected in_keys and out_keys of the same length"
        ):
            RenameTransform(["a", "b"], ["c"])

    def test_check_env_specs(self, counting_env):
        check_env_specs(
            TransformedEnv(counting_env(batch_size=[2]), RenameTransform(["observation"], ["obs"]))
        )


class TestSelectTransform:
    def test_keeps_selected_rewards_and_dones(self, counting_env):
        env = TransformedEnv(
            counting_env(), RenameTransform(["observation"], ["obs"], create_copy=True)
        )
        env.append_transform(SelectTransform("observation"))
        data = env.rollout(2)
        assert "obs" not in data["next"].keys()
        assert {"observation", "reward", "done"} <= set(data["next"].keys())
        assert "obs" not in env.observation_spec.keys()

    def test_drop_rewards(self):
        t = SelectTransform("a", keep_rewards=False, keep_dones=False)
        out = t(TensorDict({"a": torch.zeros(1), "reward": torch.zeros(1), "done": torch.zeros(1)}))
        assert list(out.keys()) == ["a"]

    def test_check_env_specs(self, counting_env):
        check_env_specs(TransformedEnv(counting_env(), SelectTransform("observation")))


class TestExcludeTransform:
    def test_excludes_from_output_and_spec(self, counting_env):
        env = TransformedEnv(
            counting_env(), RenameTransform(["observation"], ["obs"], create_copy=True)
        )
        env.append_transform(ExcludeTransform("obs"))
        assert "obs" not in env.rollout(2)["next"].keys()
        assert "obs" not in env.observation_spec.keys()

    def test_inverse_excludes_from_input(self):
        t = ExcludeTransform("hidden", inverse=True)
        td = TensorDict({"hidden": torch.zeros(1), "a": torch.zeros(1)})
        assert "hidden" in t(td).keys()
        assert "hidden" not in t.inv(td).keys()

    def test_check_env_specs(self, counting_env):
        check_env_specs(TransformedEnv(counting_env(), ExcludeTransform("observation")))


class TestRemoveEmptySpecs:
    def test_drops_empty_nested_data(self):
        td = TensorDict(
            {"a": torch.zeros(1), "empty": TensorDict(), "nested": {"deeper": TensorDict()}}
        )
        assert list(RemoveEmptySpecs()(td).keys()) == ["a"]

    def test_drops_empty_nested_specs(self, counting_env):
        base = counting_env()
        base.observation_spec = base.observation_spec.clone().set("group", Composite())
        env = TransformedEnv(base, RemoveEmptySpecs())
        assert "group" not in env.observation_spec.keys()

    def test_check_env_specs(self, counting_env):
        check_env_specs(TransformedEnv(counting_env(), RemoveEmptySpecs()))

    def test_inverse_puts_back_the_empty_state_composites(self, counting_env):
        base = counting_env()
        base.state_spec = Composite(memory=Composite(slot=Composite()))
        env = TransformedEnv(base, RemoveEmptySpecs())
        assert "memory" not in env.state_spec.keys()
        restored = env.transform.inv(TensorDict())
        assert ("memory", "slot") in restored.keys(True)
        assert restored["memory", "slot"].is_empty()
        check_env_specs(env)

    def test_inverse_outside_an_env_changes_nothing(self):
        td = TensorDict({"a": {"b": {}}})
        assert set(RemoveEmptySpecs().inv(td).keys(True)) == {"a", ("a", "b")}
