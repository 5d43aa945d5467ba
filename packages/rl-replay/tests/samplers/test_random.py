"""RandomSampler: uniform draws over every valid element."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_replay import LazyTensorStorage, ReplayBuffer
from rl_replay.samplers import RandomSampler


class TestRandomSampler:
    def test_draws_are_uniform_over_valid_elements(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(100), sampler=RandomSampler())
        rb.extend(TensorDict({"x": torch.arange(10)}, [10]))
        index, info = rb._sampler.sample(rb._storage, 100_000)
        freq = torch.bincount(index, minlength=10).double() / 100_000
        assert info == {}
        assert index.max() < 10
        torch.testing.assert_close(
            freq, torch.full((10,), 0.1, dtype=torch.float64), atol=0.006, rtol=0
        )

    def test_multidim_storage_gives_tuple_index(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(12, ndim=2), sampler=RandomSampler())
        rb.extend(TensorDict({"x": torch.zeros(2, 3)}, [2, 3]))  # 3 valid rows of 2
        rows, cols = rb._sampler.sample(rb._storage, 1000)[0]
        assert set(zip(rows.tolist(), cols.tolist())) == {
            (r, c) for r in range(3) for c in range(2)
        }

    @pytest.mark.parametrize("batch_size", [0, -1, 2.0, True])
    def test_bad_batch_size_raises(self, batch_size):
        rb = ReplayBuffer(storage=LazyTensorStorage(10), sampler=RandomSampler())
        rb.extend(TensorDict({"x": torch.zeros(3)}, [3]))
        with pytest.raises(ValueError, match="batch_size to be a positive int"):
            rb._sampler.sample(rb._storage, batch_size)

    def test_empty_storage_raises(self):
        with pytest.raises(RuntimeError, match="expected at least one stored element, found 0"):
            RandomSampler().sample(LazyTensorStorage(10), 2)

    def test_round_trip_through_dumps(self, tmp_path):
        sampler = RandomSampler()
        sampler.dumps(tmp_path)
        sampler.loads(tmp_path)
        assert sampler.state_dict() == {}
