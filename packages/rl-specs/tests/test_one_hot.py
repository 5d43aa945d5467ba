"""OneHot and MultiOneHot."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rl_specs import Categorical, MultiCategorical, MultiOneHot, OneHot


class TestOneHot:
    def test_defaults(self):
        spec = OneHot(4)
        assert spec.shape == (4,) and spec.dtype is torch.bool and spec.n == 4
        assert spec.cardinality() == 4 and spec.use_register is False

    def test_shape_must_end_with_n(self):
        with pytest.raises(ValueError, match="end with the one-hot size 3"):
            OneHot(3, shape=(2, 4))

    def test_bad_n(self):
        with pytest.raises(ValueError, match="n >= 0"):
            OneHot(-1)
        with pytest.raises(ValueError, match="no category"):
            OneHot(0).rand()
        with pytest.raises(ValueError, match="no category"):
            MultiOneHot([2, 0]).rand()

    @pytest.mark.parametrize("make", [lambda: OneHot(4, shape=(3, 4)), lambda: MultiOneHot([2, 3])])
    def test_to_numpy_gives_indices_that_encode_takes(self, make):
        spec = make()
        value = spec.rand()
        indices = spec.to_numpy(value)
        assert np.array_equal(indices, spec.to_categorical(value).numpy())
        assert torch.equal(spec.encode(indices), value)

    def test_use_register_is_part_of_equality(self):
        assert OneHot(3) != OneHot(3, use_register=True)
        assert OneHot(3, use_register=True) == OneHot(3, use_register=True)

    def test_rand_is_one_hot(self):
        sample = OneHot(5, shape=(100, 5)).rand()
        assert bool((sample.sum(-1) == 1).all())

    @pytest.mark.parametrize("dtype", [torch.bool, torch.int64, torch.float32, torch.uint8])
    def test_rand_dtype_shape_and_every_category(self, dtype):
        spec = OneHot(3, shape=(2, 3), dtype=dtype)
        samples = spec.rand((200,))
        assert samples.shape == (200, 2, 3) and samples.dtype is dtype
        assert spec.is_in(samples[0])
        assert bool((samples.sum(-1) == 1).all())
        assert bool((samples.reshape(-1, 3).sum(0) > 0).all())

    def test_rand_returns_fresh_tensors(self):
        spec = OneHot(3, dtype=torch.int64)
        first = spec.rand()
        first.fill_(7)  # writing into a sample must not touch later samples
        assert all(spec.is_in(spec.rand()) for _ in range(20))

    @pytest.mark.parametrize("dtype", [torch.bool, torch.int64, torch.float32, torch.bfloat16])
    def test_unbatched_rand_draws_like_the_indexed_path(self, dtype):
        # one vector is built by numpy (bfloat16 falls back to indexing the identity);
        # both take the same draw, so a seed gives the same samples either way
        spec = OneHot(5, dtype=dtype)
        torch.manual_seed(3)
        fast = [spec.rand() for _ in range(30)]
        torch.manual_seed(3)
        expected = [torch.eye(5, dtype=dtype)[torch.randint(0, 5, ())] for _ in range(30)]
        assert all(a.dtype is dtype and a.shape == (5,) for a in fast)
        assert all(torch.equal(a, b) for a, b in zip(fast, expected, strict=True))

    def test_is_in_rejects_non_one_hot(self):
        spec = OneHot(3, dtype=torch.int64)
        assert spec.is_in(torch.tensor([0, 1, 0]))
        assert not spec.is_in(torch.tensor([1, 1, 0]))
        assert not spec.is_in(torch.tensor([0, 2, 0]))
        assert not spec.is_in(torch.tensor([0, 0, 0]))

    def test_project_takes_argmax(self):
        spec = OneHot(3, dtype=torch.int64)
        assert torch.equal(spec.project(torch.tensor([0.2, 0.9, 0.1])), torch.tensor([0, 1, 0]))

    def test_mask(self):
        spec = OneHot(3, mask=torch.tensor([False, True, False]))
        assert torch.equal(spec.rand(), torch.tensor([False, True, False]))
        assert not spec.is_in(torch.tensor([True, False, False]))
        assert torch.equal(
            spec.project(torch.tensor([True, False, False])), torch.tensor([False, True, False])
        )
        spec.update_mask(None)
        assert spec.is_in(torch.tensor([True, False, False]))

    @pytest.mark.parametrize("value", [2, np.int64(2), np.array(2), torch.tensor(2)])
    def test_encode_index(self, value):
        assert torch.equal(OneHot(3).encode(value), torch.tensor([False, False, True]))

    def test_encode_one_hot_array(self):
        out = OneHot(3).encode(np.array([0, 1, 0]))
        assert torch.equal(out, torch.tensor([False, True, False]))

    def test_categorical_conversion(self):
        spec = OneHot(3, shape=(2, 3), mask=torch.tensor([True, True, False]))
        target = spec.to_categorical_spec()
        assert isinstance(target, Categorical) and target.shape == (2,)
        assert target.mask.shape == (2, 3)
        value = spec.rand()
        assert target.is_in(spec.to_categorical(value, safe=True))

    def test_index(self):
        values = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        index = torch.tensor([[False, False, True], [True, False, False]])
        assert torch.equal(OneHot(3, shape=(2, 3)).index(index, values), torch.tensor([3.0, 4.0]))

    def test_enumerate(self):
        spec = OneHot(3, mask=torch.tensor([True, False, True]))
        assert spec.enumerate().shape == (3, 3)
        assert spec.enumerate(use_mask=True).shape == (2, 3)

    def test_eq(self):
        assert OneHot(3) == OneHot(3)
        assert OneHot(3) != OneHot(3, dtype=torch.int64)
        assert OneHot(3) != OneHot(3, mask=torch.tensor([True, True, False]))


class TestMultiOneHot:
    def test_defaults(self):
        spec = MultiOneHot([2, 3])
        assert spec.shape == (5,) and spec.n == 5 and spec.cardinality() == 6

    def test_shape_must_end_with_sum(self):
        with pytest.raises(ValueError, match="end with the one-hot size 5"):
            MultiOneHot([2, 3], shape=(4,))

    def test_rand_has_one_hot_chunks(self):
        sample = MultiOneHot([2, 3], shape=(50, 5)).rand()
        assert bool((sample[:, :2].sum(-1) == 1).all() and (sample[:, 2:].sum(-1) == 1).all())

    def test_is_in_checks_each_chunk(self):
        spec = MultiOneHot([2, 3], dtype=torch.int64)
        assert spec.is_in(torch.tensor([0, 1, 0, 0, 1]))
        assert not spec.is_in(torch.tensor([1, 1, 0, 0, 0]))

    def test_project(self):
        spec = MultiOneHot([2, 3], dtype=torch.int64)
        out = spec.project(torch.tensor([0.1, 0.9, 0.2, 0.7, 0.1]))
        assert torch.equal(out, torch.tensor([0, 1, 0, 1, 0]))

    def test_mask(self):
        spec = MultiOneHot([2, 3], mask=torch.tensor([True, False, False, False, True]))
        assert torch.equal(spec.rand().int(), torch.tensor([1, 0, 0, 0, 1], dtype=torch.int32))
        assert not spec.is_in(torch.tensor([False, True, False, False, True]))
        projected = spec.project(torch.tensor([False, True, True, False, False]))
        assert spec.is_in(projected)

    def test_encode_indices(self):
        out = MultiOneHot([2, 3]).encode(np.array([1, 0]))
        assert out.int().tolist() == [0, 1, 1, 0, 0]

    def test_categorical_conversion(self):
        spec = MultiOneHot([2, 3], shape=(4, 5))
        target = spec.to_categorical_spec()
        assert isinstance(target, MultiCategorical) and target.shape == (4, 2)
        value = spec.rand()
        assert torch.equal(target.to_one_hot(spec.to_categorical(value, safe=True)), value)

    def test_index(self):
        values = torch.tensor([10.0, 11.0, 20.0, 21.0, 22.0])
        index = torch.tensor([0, 1, 0, 0, 1])
        assert torch.equal(MultiOneHot([2, 3]).index(index, values), torch.tensor([11.0, 22.0]))

    def test_enumerate(self):
        assert MultiOneHot([2, 3]).enumerate().shape == (6, 5)
