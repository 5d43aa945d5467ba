"""Bounded, BoundedContinuous and BoundedDiscrete."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_specs import Bounded, BoundedContinuous, BoundedDiscrete


class TestBounded:
    @pytest.mark.parametrize(
        ("kwargs", "cls"),
        [
            ({}, BoundedContinuous),
            ({"dtype": torch.float64}, BoundedContinuous),
            ({"dtype": torch.int32}, BoundedDiscrete),
            ({"domain": "discrete"}, BoundedDiscrete),
            ({"domain": "continuous", "dtype": torch.float16}, BoundedContinuous),
        ],
    )
    def test_dispatches_on_dtype_and_domain(self, kwargs, cls):
        spec = Bounded(low=0, high=4, shape=(3,), **kwargs)
        assert type(spec) is cls and isinstance(spec, Bounded)
        assert spec.is_in(spec.rand((5,)))

    def test_positional_dtype_dispatches(self):
        assert type(Bounded(0, 3, (2,), None, torch.int64)) is BoundedDiscrete

    def test_shape_inferred_from_tensor_bounds(self):
        spec = Bounded(low=torch.zeros(2, 3), high=torch.ones(3))
        assert spec.shape == (2, 3) and spec.high.shape == (2, 3)

    def test_scalar_bounds_without_shape_raise(self):
        with pytest.raises(ValueError, match="Pass shape="):
            Bounded(low=-1, high=1)

    def test_low_above_high_raises(self):
        with pytest.raises(ValueError, match=r"low <= high.*Swap"):
            Bounded(low=torch.tensor([0.0, 2.0]), high=torch.tensor([1.0, 1.0]))

    def test_bounds_must_broadcast(self):
        with pytest.raises(ValueError, match="broadcast to shape"):
            Bounded(low=torch.zeros(3), high=1.0, shape=(2,))
        with pytest.raises(ValueError, match="broadcastable"):
            Bounded(low=torch.zeros(3), high=torch.ones(2))

    def test_missing_bound_raises(self):
        with pytest.raises(TypeError, match="high to be a number"):
            Bounded(low=0.0, shape=(1,))

    @pytest.mark.parametrize(
        ("low", "high", "shape"),
        [(-1, 1, (10,)), (torch.zeros(10), 1, None), (0, torch.ones(10), (10,))],
    )
    def test_bool_dtype(self, low, high, shape):
        spec = Bounded(low, high, shape=shape, dtype=torch.bool)
        assert type(spec) is BoundedDiscrete and spec.shape == (10,)
        assert spec == spec.clone() and spec.is_in(spec.rand((3,)))
        assert spec.expand(2, 10).shape == (2, 10) and len(spec.unbind(0)) == 10
        assert torch.stack(spec.unbind(0)) == spec

    def test_bool_dtype_projects_into_its_bounds(self):
        low, high = torch.tensor([True, False, False]), torch.tensor([True, True, False])
        spec = Bounded(low, high, dtype=torch.bool)
        assert spec.project(torch.tensor([False, True, True])).tolist() == [True, True, False]
        assert spec.is_in(torch.tensor([True, False, False]))
        assert not spec.is_in(torch.tensor([False, False, False]))
        assert spec.rand().tolist()[::2] == [True, False]

    def test_is_in_checks_bounds(self):
        spec = Bounded(low=-1.0, high=1.0, shape=(2,))
        assert spec.is_in(torch.tensor([-1.0, 1.0]))
        assert not spec.is_in(torch.tensor([-1.5, 0.0]))
        assert not spec.is_in(torch.tensor([float("nan"), 0.0]))
        with pytest.raises(ValueError, match="outside its domain"):
            spec.assert_is_in(torch.tensor([2.0, 0.0]))

    def test_project_clamps(self):
        spec = Bounded(low=torch.tensor([0.0, -1.0]), high=torch.tensor([1.0, 5.0]))
        assert torch.equal(spec.project(torch.tensor([3.0, -3.0])), torch.tensor([1.0, -1.0]))

    def test_bounds_follow_shape_ops(self):
        spec = Bounded(low=torch.tensor([0.0, -1.0]), high=torch.tensor([1.0, 5.0]))
        expanded = spec.expand(3, 2)
        assert expanded.low.shape == (3, 2) and torch.equal(expanded.high[2], spec.high)
        assert torch.equal(spec[1].high, torch.tensor(5.0))

    def test_eq_compares_bounds(self):
        a = Bounded(low=0.0, high=1.0, shape=(2,))
        assert a == Bounded(low=0.0, high=1.0, shape=(2,))
        assert a != Bounded(low=0.0, high=2.0, shape=(2,))
        assert a != Bounded(low=0.0, high=1.0, shape=(2,), dtype=torch.float64)

    def test_encode_numpy(self):
        spec = Bounded(low=0.0, high=1.0, shape=(2,))
        out = spec.encode(np.array([0.5, 0.25]))
        assert out.dtype is torch.float32 and spec.is_in(out)

    def test_dynamic_shape_bounds_broadcast(self):
        spec = Bounded(low=-1.0, high=1.0, shape=(-1, 2))
        assert spec.is_dynamic and spec.is_in(torch.zeros(5, 2))
        assert not spec.is_in(torch.full((5, 2), 3.0))
        assert spec.expand(4, 2).rand().shape == (4, 2)


class TestBoundedContinuous:
    def test_rand_stays_in_bounds(self):
        spec = BoundedContinuous(low=torch.tensor([-2.0, 10.0]), high=torch.tensor([-1.0, 11.0]))
        sample = spec.rand((1000,))
        assert bool((sample >= spec.low).all() and (sample <= spec.high).all())

    @pytest.mark.parametrize(
        ("low", "high"),
        [(float("-inf"), float("inf")), (0.0, float("inf")), (float("-inf"), 0.0)],
    )
    def test_rand_with_infinite_bounds(self, low, high):
        spec = BoundedContinuous(low=low, high=high, shape=(500,))
        sample = spec.rand()
        assert bool(torch.isfinite(sample).all()) and spec.is_in(sample)


class TestBoundedDiscrete:
    def test_rand_covers_inclusive_range(self):
        spec = BoundedDiscrete(low=2, high=4, shape=(2000,))
        sample = spec.rand()
        assert sample.dtype is torch.int64
        assert set(sample.unique().tolist()) == {2, 3, 4}

    def test_project_rounds_and_clamps(self):
        spec = BoundedDiscrete(low=0, high=3, shape=(3,))
        out = spec.project(torch.tensor([-1.2, 1.6, 9.0]))
        assert torch.equal(out, torch.tensor([0, 2, 3]))


class TestBoundedProperties:
    @settings(max_examples=40, deadline=None)
    @given(
        low=st.floats(-1e3, 1e3),
        width=st.floats(0.0, 1e3),
        values=st.lists(st.floats(-1e6, 1e6), min_size=3, max_size=3),
        discrete=st.booleans(),
    )
    def test_project_lands_in_domain(self, low, width, values, discrete):
        dtype = torch.int64 if discrete else torch.float64
        spec = Bounded(low=low, high=low + width, shape=(3,), dtype=dtype)
        projected = spec.project(torch.tensor(values, dtype=torch.float64))
        assert spec.is_in(projected)
        assert spec.is_in(spec.rand((4,)))
