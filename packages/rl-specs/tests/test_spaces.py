"""The domain descriptors held in ``spec.space``."""

from __future__ import annotations

import torch

from rl_specs import Binary, Bounded, Categorical, MultiOneHot, NonTensor, Unbounded
from rl_specs._spaces import BinaryBox, BoxList, CategoricalBox, ContinuousBox, NonTensorBox


class TestSpaces:
    def test_spec_spaces(self):
        assert Categorical(3).space == CategoricalBox(3)
        assert Binary(2).space == BinaryBox(2)
        assert MultiOneHot([2, 3]).space == BoxList((CategoricalBox(2), CategoricalBox(3)))
        assert isinstance(NonTensor().space, NonTensorBox)
        assert isinstance(Bounded(0, 1, shape=(2,)).space, ContinuousBox)

    def test_continuous_box_equality(self):
        box = ContinuousBox(torch.zeros(2), torch.ones(2))
        assert box == ContinuousBox(torch.zeros(2), torch.ones(2))
        assert box != ContinuousBox(torch.zeros(2), torch.full((2,), 2.0))
        assert box != "box"
        assert Unbounded().space == ContinuousBox(float("-inf"), float("inf"))

    def test_continuous_box_repr_is_compact(self):
        assert "-1.0 (shape=(2, 3))" in repr(Bounded(-1.0, 1.0, shape=(2, 3)).space)
        varying = repr(ContinuousBox(torch.arange(3.0), torch.arange(3.0) + 1))
        assert "Tensor(shape=(3,), dtype=torch.float32)" in varying
        assert repr(ContinuousBox(0.0, 1.0)) == "ContinuousBox(low=0.0, high=1.0)"
