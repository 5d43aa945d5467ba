"""Categorical and MultiCategorical."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_specs import Categorical, MultiCategorical, MultiOneHot, OneHot


class TestCategorical:
    def test_defaults(self):
        spec = Categorical(4)
        assert spec.shape == () and spec.dtype is torch.int64 and spec.n == 4
        assert spec.cardinality() == 4 and spec.mask is None

    def test_negative_n_raises(self):
        with pytest.raises(ValueError, match=r"n >= 0.*positive"):
            Categorical(-3)

    def test_no_category_builds_but_cannot_draw(self):
        spec = Categorical(0, shape=(5, 3))
        assert spec.n == 0 and spec[1:3].shape == (2, 3) and spec.zero().shape == (5, 3)
        with pytest.raises(ValueError, match="no category"):
            spec.rand()

    @pytest.mark.parametrize("n", [2.5, "3", True])
    def test_non_int_n_raises(self, n):
        with pytest.raises(TypeError, match="n to be an int"):
            Categorical(n)

    def test_tensor_n_is_accepted(self):
        assert Categorical(torch.tensor(3)).n == 3

    def test_rand_range_and_is_in(self):
        spec = Categorical(3, shape=(500,))
        sample = spec.rand()
        assert set(sample.unique().tolist()) == {0, 1, 2}
        assert not spec.is_in(torch.full((500,), 3))
        assert not spec.is_in(torch.full((500,), -1))

    def test_bool_dtype(self):
        spec = Categorical(n=2, shape=torch.Size((1,)), dtype=torch.bool)
        assert spec.rand().dtype is torch.bool
        assert spec.is_in(torch.tensor([True]))
        assert torch.equal(spec.zero(), torch.tensor([False]))

    def test_mask_restricts_rand_and_is_in(self):
        mask = torch.tensor([[True, False, False], [False, False, True]])
        spec = Categorical(3, shape=(2,), mask=mask)
        for _ in range(5):
            assert torch.equal(spec.rand(), torch.tensor([0, 2]))
        assert spec.rand((4,)).shape == (4, 2)
        assert not spec.is_in(torch.tensor([1, 2]))
        projected = spec.project(torch.tensor([1, 2]))
        assert torch.equal(projected, torch.tensor([0, 2]))

    def test_update_mask(self):
        spec = Categorical(3)
        spec.update_mask(torch.tensor([False, True, False]))
        assert spec.rand().item() == 1
        spec.update_mask(None)
        assert spec.mask is None

    def test_mask_errors(self):
        with pytest.raises(TypeError, match=r"torch\.bool mask"):
            Categorical(3, mask=torch.ones(3))
        with pytest.raises(ValueError, match=r"mask of shape \(2, 3\)"):
            Categorical(3, shape=(2,), mask=torch.ones(4, dtype=torch.bool))
        spec = Categorical(2, mask=torch.tensor([False, False]))
        with pytest.raises(ValueError, match="allows no category"):
            spec.rand()

    def test_mask_follows_shape_ops(self):
        mask = torch.tensor([[True, False, False], [False, False, True]])
        spec = Categorical(3, shape=(2,), mask=mask)
        assert spec[1].rand().item() == 2
        assert spec.expand(4, 2).mask.shape == (4, 2, 3)
        assert spec.unsqueeze(0).mask.shape == (1, 2, 3)

    def test_project_clamps_and_rounds(self):
        spec = Categorical(4, shape=(3,))
        out = spec.project(torch.tensor([-2.0, 1.7, 9.0]))
        assert torch.equal(out, torch.tensor([0, 2, 3]))

    def test_one_hot_conversion(self):
        spec = Categorical(3, shape=(2,))
        one_hot_spec = spec.to_one_hot_spec()
        assert isinstance(one_hot_spec, OneHot) and one_hot_spec.shape == (2, 3)
        value = spec.rand()
        encoded = spec.to_one_hot(value, safe=True)
        assert one_hot_spec.is_in(encoded)
        assert torch.equal(one_hot_spec.to_categorical(encoded), value)

    def test_index_gathers_along_last_dim(self):
        values = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        out = Categorical(3, shape=(2,)).index(torch.tensor([2, 0]), values)
        assert torch.equal(out, torch.tensor([3.0, 4.0]))

    def test_enumerate(self):
        spec = Categorical(3, shape=(2,), mask=torch.tensor([True, False, True]))
        assert spec.enumerate().shape == (3, 2)
        assert torch.equal(spec.enumerate(use_mask=True)[:, 0], torch.tensor([0, 2]))

    def test_encode_numpy_int(self):
        assert torch.equal(Categorical(5).encode(np.int64(3)), torch.tensor(3))

    def test_eq_depends_on_n(self):
        assert Categorical(3) == Categorical(3)
        assert Categorical(3) != Categorical(4)


class TestMultiCategorical:
    def test_shape_defaults_to_nvec(self):
        spec = MultiCategorical([2, 3])
        assert spec.shape == (2,) and spec.cardinality() == 6
        assert torch.equal(spec.nvec, torch.tensor([2, 3]))

    def test_shape_must_end_with_len_nvec(self):
        with pytest.raises(ValueError, match="end with len"):
            MultiCategorical([2, 3], shape=(3,))

    def test_bad_nvec_entry(self):
        with pytest.raises(ValueError, match="every nvec entry >= 0"):
            MultiCategorical([2, -1])
        with pytest.raises(ValueError, match=r"no category \(sizes \[2, 0\]\)"):
            MultiCategorical([2, 0]).rand()

    @pytest.mark.parametrize("lead", [(), (3,), (4, 5)])
    def test_one_slot_samples_drop_the_slot_dim(self, lead):
        spec = MultiCategorical(5)
        assert spec.shape == (1,) and torch.equal(spec.nvec, torch.tensor([5]))
        sample = spec.rand(lead)
        assert sample.shape == lead and spec.is_in(sample)
        assert spec.is_in(sample.unsqueeze(-1)) and spec.is_in(spec.zero(lead))
        assert not spec.is_in(torch.full(lead, 5))
        projected = spec.project(torch.full(lead, 7.0))
        assert projected.shape == lead and bool((projected == 4).all())
        assert spec.to_one_hot(torch.tensor(3)).tolist() == [False] * 3 + [True, False]
        kept = MultiCategorical(5, remove_singleton=False)
        assert kept.rand(lead).shape == (*lead, 1)

    def test_dynamic_dims(self):
        spec = MultiCategorical([3, 4], shape=(-1, 2, 2))
        assert spec.is_dynamic and spec.nvec.shape == (1, 2, 2)
        assert spec.is_in(torch.randint(3, (7, 2, 2)))
        assert not spec.is_in(torch.full((7, 2, 2), 3))
        assert spec.expand(5, 2, 2).rand().shape == (5, 2, 2)
        assert spec.rand().shape == (1, 2, 2) and spec.is_in(spec.rand())

    def test_project_applies_the_mask(self):
        mask = torch.tensor([True, False, False, False, True])
        spec = MultiCategorical([2, 3], shape=(6, 2), mask=mask)
        projected = spec.project(torch.tensor([[1, 0]] * 6))
        assert projected.tolist() == [[0, 2]] * 6 and spec.is_in(projected)

    def test_rand_respects_each_slot(self):
        spec = MultiCategorical([2, 5], shape=(400, 2))
        sample = spec.rand()
        assert sample[:, 0].max() == 1 and sample[:, 1].max() == 4
        assert not spec.is_in(torch.tensor([[0, 5]] * 400))
        assert not spec.is_in(torch.tensor([[2, 0]] * 400))

    def test_mask(self):
        mask = torch.tensor([True, False, False, False, True])
        spec = MultiCategorical([2, 3], mask=mask)
        assert torch.equal(spec.rand(), torch.tensor([0, 2]))
        assert spec.is_in(torch.tensor([0, 2]))
        assert not spec.is_in(torch.tensor([1, 2]))
        spec.update_mask(None)
        assert spec.is_in(torch.tensor([1, 2]))

    def test_project(self):
        spec = MultiCategorical([2, 3])
        assert torch.equal(spec.project(torch.tensor([5, -1])), torch.tensor([1, 0]))

    def test_one_hot_round_trip(self):
        spec = MultiCategorical([2, 3], shape=(4, 2))
        target = spec.to_one_hot_spec()
        assert isinstance(target, MultiOneHot) and target.shape == (4, 5)
        value = spec.rand()
        assert torch.equal(target.to_categorical(spec.to_one_hot(value, safe=True)), value)

    def test_index(self):
        values = torch.tensor([10.0, 11.0, 20.0, 21.0, 22.0])
        out = MultiCategorical([2, 3]).index(torch.tensor([1, 2]), values)
        assert torch.equal(out, torch.tensor([11.0, 22.0]))

    def test_enumerate(self):
        assert MultiCategorical([2, 3]).enumerate().shape == (6, 2)

    def test_nvec_tensor_batch(self):
        spec = MultiCategorical(torch.tensor([[2, 3], [4, 5]]))
        assert spec.shape == (2, 2) and spec[1].nvec.tolist() == [4, 5]
        assert spec.is_in(spec.rand())


class TestCategoricalProperties:
    @settings(max_examples=40, deadline=None)
    @given(
        n=st.integers(1, 6),
        values=st.lists(st.integers(-20, 20), min_size=4, max_size=4),
        allowed=st.lists(st.booleans(), min_size=6, max_size=6),
    )
    def test_project_lands_in_domain(self, n, values, allowed):
        mask = torch.tensor(allowed[:n])
        if not bool(mask.any()):
            mask[0] = True
        spec = Categorical(n, shape=(4,), mask=mask)
        assert spec.is_in(spec.project(torch.tensor(values)))
        one_hot = spec.to_one_hot_spec()
        assert one_hot.is_in(one_hot.project(torch.randn(4, n)))
