"""Unbounded, UnboundedContinuous and UnboundedDiscrete."""

from __future__ import annotations

import pytest
import torch

from rl_specs import Unbounded, UnboundedContinuous, UnboundedDiscrete


class TestUnbounded:
    @pytest.mark.parametrize(
        ("kwargs", "cls", "dtype"),
        [
            ({}, UnboundedContinuous, torch.float32),
            ({"dtype": torch.float64}, UnboundedContinuous, torch.float64),
            ({"dtype": torch.int64}, UnboundedDiscrete, torch.int64),
            ({"dtype": torch.bool}, UnboundedDiscrete, torch.bool),
            ({"dtype": "uint8"}, UnboundedDiscrete, torch.uint8),
            ({"domain": "discrete"}, UnboundedDiscrete, torch.int64),
            ({"domain": "continuous", "dtype": torch.float16}, UnboundedContinuous, torch.float16),
        ],
    )
    def test_dispatches_on_dtype_and_domain(self, kwargs, cls, dtype):
        spec = Unbounded(shape=(2,), **kwargs)
        assert type(spec) is cls and isinstance(spec, Unbounded)
        assert spec.dtype is dtype
        assert spec.domain == ("discrete" if cls is UnboundedDiscrete else "continuous")
        assert spec.is_in(spec.rand((3,)))

    def test_positional_arguments(self):
        spec = Unbounded((1,), "cpu", torch.int32)
        assert type(spec) is UnboundedDiscrete
        assert spec.shape == (1,) and spec.device == torch.device("cpu")

    def test_default_shape(self):
        assert Unbounded().shape == torch.Size([1])

    def test_bad_domain(self):
        with pytest.raises(ValueError, match="'continuous' or 'discrete'"):
            Unbounded(shape=(1,), domain="fuzzy")

    def test_space_bounds_follow_dtype(self):
        assert Unbounded(dtype=torch.int8).space.low == -128
        assert Unbounded().space.high == float("inf")

    def test_project_casts(self):
        spec = Unbounded(shape=(2,))
        out = spec.project(torch.tensor([1, 2]))
        assert out.dtype is torch.float32 and spec.is_in(out)

    def test_zero_and_one(self):
        spec = Unbounded(shape=(2,), dtype=torch.int64)
        assert torch.equal(spec.zero(), torch.zeros(2, dtype=torch.int64))
        assert torch.equal(spec.one((1,)), torch.ones(1, 2, dtype=torch.int64))

    def test_encode_python_scalar(self):
        assert torch.equal(Unbounded((1,)).encode(3.0), torch.tensor([3.0]))


class TestUnboundedContinuous:
    def test_rand_is_gaussian_like(self):
        torch.manual_seed(0)
        sample = UnboundedContinuous(shape=(10000,)).rand()
        assert abs(sample.mean().item()) < 0.05 and 0.9 < sample.std().item() < 1.1


class TestUnboundedDiscrete:
    def test_rand_spans_dtype(self):
        sample = UnboundedDiscrete(shape=(1000,), dtype=torch.int8).rand()
        assert sample.dtype is torch.int8 and sample.min() < -50 and sample.max() > 50
