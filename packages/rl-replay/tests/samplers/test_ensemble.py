"""SamplerEnsemble: one sub-batch per picked storage."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_replay import LazyTensorStorage
from rl_replay.samplers import (
    PrioritizedSampler,
    RandomSampler,
    SamplerEnsemble,
    SamplerWithoutReplacement,
)


class Storages:
    def __init__(self, *sizes: int) -> None:
        self._storages = []
        for size in sizes:
            storage = LazyTensorStorage(size)
            storage.set(torch.arange(size), TensorDict({"x": torch.arange(size)}, [size]))
            self._storages.append(storage)


class TestSamplerEnsemble:
    def test_sample_from_all(self):
        sampler = SamplerEnsemble(RandomSampler(), RandomSampler(), sample_from_all=True)
        (buffer_ids, indices), info = sampler.sample(Storages(3, 50), 10)
        assert buffer_ids.tolist() == [0, 1]
        assert [index.numel() for index in indices] == [5, 5]
        assert indices[0].max() < 3
        assert info["buffer_ids"] is buffer_ids and info["infos"] == [{}, {}]

    def test_probabilities_pick_buffers(self):
        sampler = SamplerEnsemble(
            RandomSampler(), RandomSampler(), p=[0.0, 1.0], num_buffer_sampled=4
        )
        (buffer_ids, indices), _ = sampler.sample(Storages(3, 50), 8)
        assert buffer_ids.tolist() == [1, 1, 1, 1] and len(indices) == 4

    def test_update_priority_is_forwarded(self):
        inner = PrioritizedSampler(5, alpha=1.0, beta=1.0, eps=0.0)
        inner.extend(torch.arange(5))
        sampler = SamplerEnsemble(RandomSampler(), inner, sample_from_all=True)
        sampler.update_priority(
            (torch.tensor([0, 1]), [torch.tensor([0]), torch.tensor([3])]), torch.tensor([9.0, 4.0])
        )
        assert inner._sum_tree[torch.tensor([3])].item() == 4.0

    @pytest.mark.parametrize(
        "kwargs, match",
        [
            ({"p": [0.5, 0.5], "sample_from_all": True}, "either p or sample_from_all"),
            ({"p": [1.0]}, "p to hold 2 non-negative values"),
            ({"p": [-1.0, 2.0]}, "p to hold 2 non-negative values"),
            ({"num_buffer_sampled": 0}, "num_buffer_sampled to be a positive int"),
        ],
    )
    def test_bad_arguments_raise(self, kwargs, match):
        with pytest.raises(ValueError, match=match):
            SamplerEnsemble(RandomSampler(), RandomSampler(), **kwargs)

    def test_no_sampler_raises(self):
        with pytest.raises(ValueError, match="at least one sampler"):
            SamplerEnsemble()

    def test_wrong_storage_raises(self):
        with pytest.raises(TypeError, match="storage ensemble holding 2 storages"):
            SamplerEnsemble(RandomSampler(), RandomSampler()).sample(LazyTensorStorage(3), 2)

    def test_batch_not_divisible_raises(self):
        with pytest.raises(ValueError, match="multiple of num_buffer_sampled=2, got 3"):
            SamplerEnsemble(RandomSampler(), RandomSampler()).sample(Storages(3, 3), 3)

    def test_round_trip_through_dumps(self, tmp_path):
        sampler = SamplerEnsemble(
            SamplerWithoutReplacement(), SamplerWithoutReplacement(), sample_from_all=True
        )
        storages = Storages(6, 6)
        sampler.sample(storages, 4)
        sampler.dumps(tmp_path)
        other = SamplerEnsemble(
            SamplerWithoutReplacement(), SamplerWithoutReplacement(), sample_from_all=True
        )
        other.loads(tmp_path)
        a, b = other.sample(storages, 8)[0][1], sampler.sample(storages, 8)[0][1]
        assert all(torch.equal(x, y) for x, y in zip(a, b))

    def test_load_state_with_other_size_raises(self):
        with pytest.raises(ValueError, match="states for 1 samplers, got 2"):
            SamplerEnsemble(RandomSampler()).load_state_dict({"0": {}, "1": {}})
