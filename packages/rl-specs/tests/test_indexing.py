"""Indexing specs like tensors: Ellipsis, bounds, negative steps and dynamic dims."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rl_specs import Bounded, Categorical, Composite, OneHot, Unbounded
from rl_specs._indexing import _normalize_index

# leaf specs whose batch dims are (5, 3); their event dims (if any) stay
SPECS = {
    "unbounded": lambda: Unbounded(shape=(5, 3)),
    "bounded": lambda: Bounded(low=torch.arange(15.0).reshape(5, 3), high=100.0, shape=(5, 3)),
    "categorical": lambda: Categorical(4, shape=(5, 3)),
    "one_hot": lambda: OneHot(4, shape=(5, 3, 4)),
    "composite": lambda: Composite(a=Unbounded(shape=(5, 3, 2)), shape=(5, 3)),
}
spec_params = pytest.mark.parametrize("make", SPECS.values(), ids=SPECS.keys())


def batch_shape(spec) -> tuple:
    return tuple(spec.shape[:2])


class TestIndexing:
    def test_ellipsis_is_expanded(self):
        assert _normalize_index((0, ...), 3, owner="x") == (0, slice(None), slice(None))
        assert _normalize_index((..., 1), 2, owner="x") == (slice(None), 1)

    @spec_params
    @pytest.mark.parametrize(
        ("index", "expected"),
        [
            (slice(10, 1, -1), (3, 3)),
            (slice(None, None, -2), (3, 3)),
            ((slice(None), slice(None, None, -1)), (5, 3)),
            ((1, slice(2, None, -1)), (3,)),
            (slice(10, None), (0, 3)),
            ((None, slice(None, 2)), (1, 2, 3)),
            (np.array([[1, 2]]), (1, 2, 3)),
            (([0, 1], [0, 1]), (2,)),
            (((0, 1), (0, 1)), (2,)),
            (range(2), (2, 3)),
        ],
    )
    def test_index_shapes_follow_tensors(self, make, index, expected):
        spec = make()
        assert tuple(spec[index].shape[: len(expected)]) == expected
        assert np.zeros((5, 3))[index].shape == expected  # numpy has negative steps

    def test_negative_step_reverses_the_bounds(self):
        spec = SPECS["bounded"]()
        assert torch.equal(spec[::-1].low, spec.low.flip(0))
        assert torch.equal(spec[:, ::-2].low, spec.low[:, [2, 0]])
        assert torch.equal(spec[3:0:-1, [0, 2]].low, spec.low[[3, 2, 1]][:, [0, 2]])

    @spec_params
    @pytest.mark.parametrize(
        "index", [5, -6, (0, 3), [0, 7], torch.tensor([10]), (slice(None), [-4])]
    )
    def test_out_of_bounds_raises(self, make, index):
        with pytest.raises(IndexError, match="Use indices in"):
            make()[index]

    def test_keys_and_float_indices_are_refused_by_leaves(self):
        with pytest.raises(TypeError, match="Keys index Composite specs"):
            Unbounded(shape=(3,))["observation"]
        with pytest.raises(IndexError, match=r"index\.long\(\)"):
            Unbounded(shape=(3,))[torch.tensor([0.0])]

    def test_index_select_checks_bounds(self):
        spec = Categorical(4, shape=(5,))
        with pytest.raises(IndexError, match="index 10 for dim 0 of size 5"):
            torch.index_select(spec, 0, torch.tensor([10]))
        assert torch.index_select(spec, 0, torch.tensor([], dtype=torch.long)).shape == (0,)

    def test_dynamic_dim_takes_only_full_slices(self):
        spec = Categorical(4, shape=(1, 1, 2)).expand(1, -1, 2)
        assert spec.shape == (1, -1, 2)
        assert spec[0].shape == (-1, 2) and spec[0, :].shape == (-1, 2)
        assert spec[:, :, 0].shape == (1, -1)
        for bad in [(0, slice(1, 2)), (0, 0), (slice(None), torch.tensor([0]))]:
            with pytest.raises(IndexError, match="dynamic"):
                spec[bad]

    def test_composite_keeps_dynamic_dims_of_its_entries(self):
        spec = Composite(action=Categorical(4, shape=(1, 2)), shape=(1,))
        spec = spec.unsqueeze(1).expand(1, -1)
        assert spec.shape == (1, -1)
        assert spec[0].shape == (-1,) and spec[0]["action"].shape == (-1, 2)
