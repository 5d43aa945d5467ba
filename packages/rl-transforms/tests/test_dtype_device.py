"""DTypeCastTransform, DoubleToFloat, DeviceCastTransform, PinMemoryTransform."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs_core import check_env_specs
from rl_specs import Bounded, Composite
from rl_transforms import (
    DeviceCastTransform,
    DoubleToFloat,
    DTypeCastTransform,
    PinMemoryTransform,
    TransformedEnv,
)


class TestDTypeCastTransform:
    def test_casts_selected_keys_only(self):
        t = DTypeCastTransform(torch.float64, torch.float16, in_keys=["a"])
        td = t(
            TensorDict(
                {"a": torch.zeros(1, dtype=torch.float64), "b": torch.zeros(1, dtype=torch.float64)}
            )
        )
        assert td["a"].dtype == torch.float16 and td["b"].dtype == torch.float64

    def test_without_keys_casts_every_matching_tensor(self):
        t = DTypeCastTransform(torch.int32, torch.int64)
        td = t(TensorDict({"a": torch.zeros(1, dtype=torch.int32), "b": torch.zeros(1)}))
        assert td["a"].dtype == torch.int64 and td["b"].dtype == torch.float32

    def test_inverse_casts_back(self):
        t = DTypeCastTransform(torch.float64, torch.float32, in_keys_inv=["action"])
        assert t.inv(TensorDict({"action": torch.zeros(1)}))["action"].dtype == torch.float64

    def test_bad_dtype_raises(self):
        with pytest.raises(
            TypeError, match=r"DTypeCastTransform expected dtype_out to be a torch.dtype"
        ):
            DTypeCastTransform(torch.float64, "float")

    def test_env_keys_resolved_from_specs(self, continuous_env):
        t = DTypeCastTransform(torch.float64, torch.float32)
        env = TransformedEnv(continuous_env(), t)
        assert t.in_keys == ["observation"]
        assert env.observation_spec["observation"].dtype == torch.float32
        assert env.reset()["observation"].dtype == torch.float32

    def test_check_env_specs(self, continuous_env):
        check_env_specs(
            TransformedEnv(
                continuous_env(batch_size=[2]), DTypeCastTransform(torch.float64, torch.float32)
            )
        )


class TestDoubleToFloat:
    def test_inverse_on_action(self, continuous_env):
        base = continuous_env()
        env = TransformedEnv(base, DoubleToFloat(in_keys_inv=["action"]))
        data = env.rollout(2)
        assert data["action"].dtype == torch.float32
        assert data["next", "observation"].dtype == torch.float32
        assert base.last_action.dtype == torch.float64

    def test_noop_without_double_entries(self, counting_env):
        t = DoubleToFloat()
        env = TransformedEnv(counting_env(), t)
        assert t.in_keys == []
        assert env.rollout(2)["next", "observation"].dtype == torch.float32

    def test_clone_resolves_again(self, continuous_env, counting_env):
        t = DoubleToFloat()
        TransformedEnv(continuous_env(), t)
        copy = t.clone()
        TransformedEnv(counting_env(), copy)
        assert t.in_keys == ["observation"] and copy.in_keys == []

    def test_check_env_specs(self, continuous_env):
        check_env_specs(TransformedEnv(continuous_env(), DoubleToFloat(in_keys_inv=["action"])))


class TestDeviceCastTransform:
    def test_moves_whole_tensordict(self):
        out = DeviceCastTransform("cpu")(TensorDict({"a": torch.zeros(1)}, device=None))
        assert out.device == torch.device("cpu")

    def test_moves_selected_keys(self):
        t = DeviceCastTransform("meta", in_keys=["a"])
        out = t(TensorDict({"a": torch.zeros(1), "b": torch.zeros(1)}))
        assert out["a"].device.type == "meta" and out["b"].device.type == "cpu"

    def test_inverse_to_orig_device(self):
        t = DeviceCastTransform("cpu", "meta", in_keys_inv=["action"])
        assert t.inv(TensorDict({"action": torch.zeros(1)}))["action"].device.type == "meta"

    def test_check_env_specs(self, counting_env):
        env = TransformedEnv(counting_env(), DeviceCastTransform("cpu", "cpu"))
        assert env.observation_spec["observation"].device == torch.device("cpu")
        check_env_specs(env)

    @pytest.mark.cuda
    def test_to_cuda(self, counting_env):
        if not torch.cuda.is_available():
            pytest.skip("needs a CUDA device")
        t = DeviceCastTransform("cuda")
        assert t(TensorDict({"a": torch.zeros(1)}))["a"].is_cuda


class TestPinMemoryTransform:
    def test_values_unchanged(self):
        out = PinMemoryTransform()(TensorDict({"a": torch.arange(3)}))
        assert out["a"].tolist() == [0, 1, 2]

    @pytest.mark.cuda
    def test_pins_with_cuda(self):
        if not torch.cuda.is_available():
            pytest.skip("needs a CUDA device")
        assert PinMemoryTransform()(TensorDict({"a": torch.zeros(2)}))["a"].is_pinned()

    def test_check_env_specs(self, counting_env):
        check_env_specs(TransformedEnv(counting_env(), PinMemoryTransform()))


class TestDeviceCastEnvDevice:
    """CPU device indices stand in for two devices (tensors of both live in host memory)."""

    def test_whole_cast_changes_the_env_device_and_records_the_origin(self, counting_env):
        t = DeviceCastTransform("cpu:1")
        env = TransformedEnv(counting_env(device="cpu:0"), t)
        assert env.device == torch.device("cpu:1")
        assert t.orig_device == torch.device("cpu:0")
        check_env_specs(env)

    @pytest.mark.parametrize("out_keys", [None, ["obs_moved"]])
    def test_partial_cast_leaves_the_env_without_a_device(self, counting_env, out_keys):
        env = TransformedEnv(
            counting_env(device="cpu:0"),
            DeviceCastTransform("cpu:1", in_keys=["observation"], out_keys=out_keys,
                                in_keys_inv=["action"]),
        )
        assert env.device is None
        assert env.observation_spec.device is None
        check_env_specs(env)

    def test_partial_cast_of_data_drops_the_tensordict_device(self):
        data = TensorDict({"a": torch.zeros(2), "b": torch.zeros(2)}, [2], device="cpu:0")
        out = DeviceCastTransform("cpu:1", in_keys=["a"])(data)
        assert out.device is None
        assert data.device == torch.device("cpu:0")


def test_input_spec_without_state_spec_is_transformed():
    action = Bounded(0.0, 1.0, (3,), dtype=torch.float64)
    spec = Composite(full_action_spec=Composite(action=action), full_state_spec=None)
    out = DoubleToFloat(in_keys_inv=["action"]).transform_input_spec(spec)
    assert out["full_action_spec", "action"].dtype == torch.float32
    assert out.get("full_state_spec") is None
