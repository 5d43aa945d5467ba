"""RandomCropTensorDict."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_transforms import RandomCropTensorDict


def _trajectories(batch=3, steps=10):
    return TensorDict({"step": torch.arange(steps).expand(batch, steps).clone()}, [batch, steps])


class TestRandomCropTensorDict:
    def test_windows_are_consecutive(self):
        out = RandomCropTensorDict(4)(_trajectories())
        assert out.batch_size == torch.Size([3, 4])
        assert ((out["step"][:, 1:] - out["step"][:, :-1]) == 1).all()

    def test_starts_vary(self):
        torch.manual_seed(0)
        starts = {
            int(RandomCropTensorDict(2)(_trajectories(1, 10))["step"][0, 0]) for _ in range(30)
        }
        assert len(starts) > 3 and max(starts) <= 8

    def test_sample_dim_other_than_last(self):
        data = _trajectories(3, 10).transpose(0, 1)
        out = RandomCropTensorDict(4, sample_dim=0)(data)
        assert out.batch_size == torch.Size([4, 3])

    def test_mask_keeps_windows_in_valid_steps(self):
        data = _trajectories(2, 10)
        mask = torch.arange(10).expand(2, 10) < torch.tensor([[4], [10]])
        data.set("mask", mask)
        for _ in range(20):
            out = RandomCropTensorDict(3, mask_key="mask")(data)
            assert out["mask"].all()

    def test_too_short_raises(self):
        with pytest.raises(
            ValueError, match=r"RandomCropTensorDict got a trajectory of 10 valid steps"
        ):
            RandomCropTensorDict(11)(_trajectories())

    def test_bad_length_raises(self):
        with pytest.raises(ValueError, match=r"RandomCropTensorDict expected sub_seq_len >= 1"):
            RandomCropTensorDict(0)
