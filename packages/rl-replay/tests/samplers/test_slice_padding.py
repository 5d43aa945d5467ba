"""``SliceSampler(pad_output=True)``: short slices padded to a fixed length, with a mask."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_replay import LazyTensorStorage, SliceSampler, TensorDictReplayBuffer


def _buffer(lengths, slice_len, num_slices, with_init=True):
    parts = []
    for episode, length in enumerate(lengths):
        fields = {
            "episode": torch.full((length,), episode),
            "step": torch.arange(length) + 100 * episode,
        }
        if with_init:
            fields["is_init"] = (torch.arange(length) == 0).unsqueeze(-1)
        parts.append(TensorDict(fields, [length]))
    rb = TensorDictReplayBuffer(
        storage=LazyTensorStorage(sum(lengths)),
        sampler=SliceSampler(
            slice_len=slice_len, traj_key="episode", strict_length=False, pad_output=True
        ),
        batch_size=num_slices * slice_len,
    )
    rb.extend(torch.cat(parts))
    return rb


def test_every_slice_is_padded_with_its_last_real_step():
    torch.manual_seed(3)
    rb = _buffer([2, 7, 4], slice_len=5, num_slices=6)
    for _ in range(5):
        sample = rb.sample()
        assert sample.batch_size == (30,)
        mask = sample["collector", "mask"].view(6, 5)
        assert mask.dtype == torch.bool
        steps = sample["step"].view(6, 5)
        for row_mask, row_steps in zip(mask, steps, strict=True):
            real = int(row_mask.sum())
            assert real >= 1 and row_mask[:real].all() and not row_mask[real:].any()
            assert (row_steps[real:] == row_steps[real - 1]).all()
            assert (row_steps[1:real] - row_steps[: real - 1] == 1).all()


def test_signals_sit_on_real_steps():
    torch.manual_seed(4)
    rb = _buffer([3, 6, 2], slice_len=4, num_slices=5)
    sample = rb.sample()
    mask = sample["collector", "mask"].view(5, 4)
    truncated = sample["next", "truncated"].view(5, 4)
    last_real = mask.sum(-1) - 1
    assert torch.equal(truncated.nonzero()[:, 1], last_real)
    assert sample["is_init"].view(5, 4)[:, 0].all()


def test_no_is_init_is_invented():
    rb = _buffer([3, 5], slice_len=4, num_slices=2, with_init=False)
    assert "is_init" not in rb.sample().keys()


def test_unpadded_sampler_writes_no_mask():
    rb = TensorDictReplayBuffer(
        storage=LazyTensorStorage(8),
        sampler=SliceSampler(slice_len=2, traj_key="episode", strict_length=False),
        batch_size=4,
    )
    rb.extend(TensorDict({"episode": torch.tensor([0, 0, 0, 1, 1, 1, 1, 1])}, [8]))
    assert ("collector", "mask") not in rb.sample().keys(True)


def test_padding_needs_non_strict_slices():
    with pytest.raises(ValueError, match="pad_output=True is incompatible with strict_length"):
        SliceSampler(slice_len=4, traj_key="episode", pad_output=True)
