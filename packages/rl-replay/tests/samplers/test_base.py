"""The Sampler base: pickling and the shared index helpers."""

from __future__ import annotations

import pickle

import pytest
import torch
from tensordict import TensorDict

from rl_replay import LazyTensorStorage, ReplayBuffer
from rl_replay.samplers import PrioritizedSampler, RandomSampler, Sampler, SliceSampler
from rl_replay.samplers.base import ravel, rows_of, unravel


class TestSampler:
    def test_is_abstract(self):
        with pytest.raises(TypeError, match="abstract"):
            Sampler()

    @pytest.mark.parametrize(
        "make",
        [
            RandomSampler,
            lambda: PrioritizedSampler(8, alpha=1.0, beta=1.0),
            lambda: SliceSampler(num_slices=1, traj_key="ep"),
        ],
    )
    def test_pickles_with_a_fresh_lock(self, make):
        rb = ReplayBuffer(storage=LazyTensorStorage(8), sampler=make())
        rb.extend(TensorDict({"ep": torch.zeros(4, dtype=torch.long)}, [4]))
        copy = pickle.loads(pickle.dumps(rb._sampler))
        with copy._lock:
            pass
        torch.manual_seed(0)
        expected = rb._sampler.sample(rb._storage, 2)[0]
        torch.manual_seed(0)
        assert torch.equal(copy.sample(rb._storage, 2)[0], expected)

    def test_ravel_and_unravel_are_inverse(self):
        storage = LazyTensorStorage(12, ndim=2)
        storage.set(torch.arange(4), TensorDict({"x": torch.zeros(4, 3)}, [4, 3]))
        flat = torch.tensor([0, 5, 11])
        assert torch.equal(ravel(unravel(flat, storage), storage), flat)
        assert torch.equal(ravel(torch.stack(unravel(flat, storage), -1).unbind(-1), storage), flat)

    @pytest.mark.parametrize(
        "index, expected",
        [
            (2, [2]),
            (slice(1, 3), [1, 2]),
            (torch.tensor([3, 3, 0]), [0, 3]),
            ((torch.tensor([1]), torch.tensor([0])), [1]),
        ],
    )
    def test_rows_of(self, index, expected):
        assert rows_of(index, 5).tolist() == expected
