"""``rb[k]`` reads written elements only: positions past ``len`` are an IndexError."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_replay import LazyMemmapStorage, LazyTensorStorage, ListStorage, ReplayBuffer


@pytest.mark.parametrize("storage", [LazyTensorStorage, LazyMemmapStorage, ListStorage])
@pytest.mark.parametrize("index", [3, 9, -4])
def test_int_index_past_len_raises_index_error(storage, index):
    rb = ReplayBuffer(storage=storage(10))
    rb.extend(torch.arange(3) if storage is not ListStorage else [0, 1, 2])
    with pytest.raises(IndexError, match=r"expected positions in \[-3, 3\)"):
        rb[index]


def test_tensor_index_past_len_raises_and_negative_counts_from_len():
    rb = ReplayBuffer(storage=LazyTensorStorage(10))
    rb.extend(torch.arange(3) * 10)
    with pytest.raises(IndexError, match="positions from 1 to 5"):
        rb[torch.tensor([1, 5])]
    assert rb[torch.tensor([-1, 0])].tolist() == [20, 0]
    assert rb[-1].item() == 20 and rb[2].item() == 20


def test_multi_dim_storage_checks_the_first_dim():
    rb = ReplayBuffer(storage=LazyTensorStorage(20, ndim=2))
    rb.extend(TensorDict({"x": torch.ones(2, 3)}, [2, 3]))  # 3 rows of 2 envs
    assert rb[2]["x"].shape == (2,)
    with pytest.raises(IndexError):
        rb[3]
    with pytest.raises(IndexError):
        rb[(torch.tensor([3]), torch.tensor([0]))]


def test_slices_stay_clipped_to_len():
    rb = ReplayBuffer(storage=LazyTensorStorage(10))
    rb.extend(torch.arange(3))
    assert rb[1:100].tolist() == [1, 2]
