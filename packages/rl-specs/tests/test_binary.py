"""Binary."""

from __future__ import annotations

import pytest
import torch

from rl_specs import Binary, Categorical


class TestBinary:
    def test_n_and_shape(self):
        assert Binary(3).shape == (3,)
        assert Binary(shape=(2, 4)).n == 4
        spec = Binary(1, shape=(1,), dtype=torch.bool)
        assert spec.dtype is torch.bool and isinstance(spec, Categorical)

    def test_missing_n_and_shape(self):
        with pytest.raises(TypeError, match="n or shape"):
            Binary()

    @pytest.mark.parametrize(("n", "shape"), [(3, (2, 4)), (1, ())])
    def test_mismatched_n(self, n, shape):
        with pytest.raises(ValueError, match="n to be the size of the last dim"):
            Binary(n, shape=shape)

    def test_scalar_shape_is_one_flag(self):
        spec = Binary(shape=())
        assert spec.n == 0 and spec == spec.clone() and spec.cardinality() == 2
        assert spec.rand().shape == () and spec.rand((3,)).shape == (3,)
        assert spec.is_in(torch.tensor(1, dtype=torch.int8))
        assert spec.enumerate().tolist() == [0, 1]
        assert spec.unsqueeze(0) == Binary(1)

    @pytest.mark.parametrize(("dim", "shape"), [(-1, (3, 4, 1)), (2, (3, 4, 1)), (0, (1, 3, 4))])
    def test_unsqueeze_anywhere(self, dim, shape):
        spec = Binary(4, shape=(3, 4)).unsqueeze(dim)
        assert spec.shape == shape and spec.n == shape[-1]
        assert spec.squeeze(dim) == Binary(4, shape=(3, 4))

    def test_squeeze_the_flags_dim(self):
        assert Binary(shape=(3, 1)).squeeze(-1) == Binary(3)
        assert Binary(shape=(2, 1, 3)).squeeze().shape == (2, 3)
        assert Binary(shape=(2, 3)).squeeze(0).shape == (2, 3)

    def test_values(self):
        spec = Binary(4)
        assert spec.dtype is torch.int8
        assert set(spec.rand((100,)).unique().tolist()) <= {0, 1}
        assert not spec.is_in(torch.tensor([0, 2, 0, 1], dtype=torch.int8))
        assert spec.cardinality() == 16

    def test_project(self):
        spec = Binary(3, dtype=torch.int64)
        assert torch.equal(spec.project(torch.tensor([0.2, 0.7, 3.0])), torch.tensor([0, 1, 1]))
        assert torch.equal(spec.project(torch.tensor([0, 5, -1])), torch.tensor([0, 1, 1]))

    def test_no_mask(self):
        spec = Binary(2)
        spec.update_mask(None)
        with pytest.raises(TypeError, match="no mask"):
            spec.update_mask(torch.ones(2, dtype=torch.bool))

    def test_enumerate(self):
        values = Binary(2, dtype=torch.int64).enumerate()
        assert values.tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]

    def test_done_flag_or(self):
        done = Binary(1, shape=(1,), dtype=torch.bool).zero() | True
        assert done.tolist() == [True]
