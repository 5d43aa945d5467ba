"""SignTransform, ClipTransform, UnaryTransform, FiniteTensorDictCheck."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs_core import check_env_specs
from rl_specs import Bounded
from rl_transforms import (
    ClipTransform,
    FiniteTensorDictCheck,
    SignTransform,
    TransformedEnv,
    UnaryTransform,
)


class TestSignTransform:
    def test_signs_and_spec(self, counting_env):
        assert SignTransform(in_keys=["r"])(TensorDict({"r": torch.tensor([-2.0, 0.0, 3.0])}))[
            "r"
        ].tolist() == [-1.0, 0.0, 1.0]
        env = TransformedEnv(counting_env(), SignTransform(in_keys=["reward"]))
        assert isinstance(env.reward_spec, Bounded)

    def test_check_env_specs(self, counting_env):
        check_env_specs(
            TransformedEnv(counting_env(), SignTransform(in_keys=["observation", "reward"]))
        )


class TestClipTransform:
    def test_clips_forward_and_inverse(self):
        t = ClipTransform(in_keys=["obs"], in_keys_inv=["action"], low=-1.0, high=1.0)
        assert t(TensorDict({"obs": torch.tensor([-3.0, 2.0])}))["obs"].tolist() == [-1.0, 1.0]
        assert t.inv(TensorDict({"action": torch.tensor([5.0])}))["action"].tolist() == [1.0]

    def test_one_sided(self):
        assert ClipTransform(in_keys=["x"], low=0.0)(TensorDict({"x": torch.tensor([-1.0, 9.0])}))[
            "x"
        ].tolist() == [0.0, 9.0]

    @pytest.mark.parametrize(
        "kwargs, error, match",
        [
            ({}, TypeError, "expected low and/or high"),
            ({"low": torch.zeros(2)}, TypeError, "low and high must be scalars or None"),
            ({"low": 1.0, "high": 0.0}, ValueError, "expected low < high"),
            ({"low": 1.0, "high": 1.0}, ValueError, "strictly lower than `high`"),
        ],
    )
    def test_bad_bounds_raise(self, kwargs, error, match):
        with pytest.raises(error, match=match):
            ClipTransform(in_keys=["x"], **kwargs)

    def test_action_spec_narrowed(self, continuous_env):
        env = TransformedEnv(
            continuous_env(), ClipTransform(in_keys_inv=["action"], low=-0.5, high=0.5)
        )
        assert env.action_spec.high.max().item() == 0.5

    def test_check_env_specs(self, continuous_env):
        env = TransformedEnv(
            continuous_env(dtype=torch.float32),
            ClipTransform(in_keys=["observation"], low=0.0, high=2.0),
        )
        check_env_specs(env)


class TestUnaryTransform:
    def test_forward_and_inverse_functions(self):
        t = UnaryTransform(
            ["x"], ["y"], in_keys_inv=["a"], out_keys_inv=["b"], fn=torch.exp, inv_fn=torch.log
        )
        assert t(TensorDict({"x": torch.zeros(1)}))["y"].item() == 1.0
        assert t.inv(TensorDict({"b": torch.ones(1)}))["a"].item() == 0.0

    def test_dtype_change_in_spec(self, counting_env):
        env = TransformedEnv(
            counting_env(), UnaryTransform(["observation"], ["as_int"], fn=lambda x: x.long())
        )
        assert env.observation_spec["as_int"].dtype == torch.int64
        check_env_specs(env)

    def test_non_callable_raises(self):
        with pytest.raises(TypeError, match=r"UnaryTransform expected a callable fn"):
            UnaryTransform(["x"], ["y"], fn=3)

    def test_check_env_specs(self, counting_env):
        check_env_specs(
            TransformedEnv(
                counting_env(batch_size=[2]), UnaryTransform(["observation"], ["o"], fn=torch.neg)
            )
        )


class TestFiniteTensorDictCheck:
    def test_finite_passes(self):
        assert FiniteTensorDictCheck()(TensorDict({"a": torch.ones(1)}))["a"].item() == 1.0

    @pytest.mark.parametrize("value", [float("nan"), float("inf")])
    def test_non_finite_raises(self, value):
        with pytest.raises(ValueError, match=r"FiniteTensorDictCheck found non-finite values.*'a'"):
            FiniteTensorDictCheck()(TensorDict({"a": torch.tensor([value])}))

    def test_check_env_specs(self, counting_env):
        check_env_specs(TransformedEnv(counting_env(), FiniteTensorDictCheck()))
