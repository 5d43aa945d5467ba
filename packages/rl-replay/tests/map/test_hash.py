"""Hashing modules: SipHash, RandomProjectionHash, BinaryToDecimal, HashToInt."""

from __future__ import annotations

import pytest
import torch

from rl_replay import BinaryToDecimal, HashToInt, RandomProjectionHash, SipHash


class TestBinaryToDecimal:
    def test_groups_of_bits_are_read_and_summed(self):
        b2d = BinaryToDecimal(num_bits=4, device="cpu", dtype=torch.int64)
        bits = torch.tensor([[1, 0, 0, 1, 0, 0, 1, 0], [0, 0, 0, 0, 1, 1, 1, 1]])
        assert b2d(bits).tolist() == [9 + 2, 15]

    def test_convert_to_binary_thresholds_at_zero(self):
        b2d = BinaryToDecimal(num_bits=2, device="cpu", dtype=torch.int32, convert_to_binary=True)
        assert b2d(torch.tensor([[5.0, -3.0]])).tolist() == [2]

    def test_width_not_a_multiple_raises(self):
        with pytest.raises(ValueError, match="multiple of num_bits=4"):
            BinaryToDecimal(num_bits=4, device="cpu", dtype=torch.int32)(torch.zeros(2, 6))


class TestSipHash:
    def test_equal_rows_hash_equal(self):
        a = torch.rand(5, 3)
        h = SipHash()
        assert torch.equal(h(a), h(a.clone()))
        assert h(a).unique().numel() == 5

    def test_as_tensor_false_returns_the_rows_bytes(self):
        out = SipHash(as_tensor=False)(torch.zeros(3, 2))
        assert len(out) == 3 and all(isinstance(b, bytes) for b in out)

    def test_non_tensor_raises(self):
        with pytest.raises(TypeError, match="expected a tensor"):
            SipHash()([1, 2, 3])


class TestRandomProjectionHash:
    @pytest.mark.parametrize("n_components", [None, 8])
    def test_distinct_rows_get_distinct_hashes(self, n_components):
        torch.manual_seed(0)
        h = RandomProjectionHash(n_components=n_components)
        assert h.n_components == (16 if n_components is None else n_components)
        out = h(torch.randn(500, 40))
        assert out.shape == (500,) and out.unique().numel() == 500

    def test_other_feature_count_raises(self):
        h = RandomProjectionHash()
        h(torch.randn(3, 4))
        with pytest.raises(ValueError, match="fit on inputs with 4 features, got 5"):
            h(torch.randn(3, 5))


class TestHashToInt:
    def test_new_hashes_get_contiguous_indices(self):
        h2i = HashToInt()
        assert h2i(torch.tensor([10, 20, 10, 30])).tolist() == [0, 1, 0, 2]
        assert len(h2i) == 3 and h2i.get_next_index() == 3

    def test_unknown_hashes_map_to_minus_one_without_extend(self):
        h2i = HashToInt()
        h2i(torch.tensor([10]))
        assert h2i(torch.tensor([10, 11]), extend=False).tolist() == [0, -1]
        assert len(h2i) == 1

    @pytest.mark.parametrize("bad", [torch.tensor([1.5]), torch.tensor([True]), [1, 2]])
    def test_hash_of_the_wrong_dtype_raises(self, bad):
        with pytest.raises(TypeError, match="expected an integer tensor of hashes"):
            HashToInt()(bad)
