"""The ``replacement`` flag of the sampler constructors."""

from __future__ import annotations

import pickle

import pytest
import torch
from tensordict import TensorDict

from rl_replay import (
    LazyTensorStorage,
    PrioritizedSampler,
    PrioritizedSliceSampler,
    RandomSampler,
    ReplayBuffer,
    SamplerWithoutReplacement,
    SliceSampler,
    SliceSamplerWithoutReplacement,
)


def test_random_sampler_without_replacement_is_the_epoch_sampler():
    assert type(RandomSampler()) is RandomSampler
    assert type(RandomSampler(replacement=True)) is RandomSampler
    sampler = RandomSampler(replacement=False, drop_last=True, shuffle=False)
    assert type(sampler) is SamplerWithoutReplacement
    assert (sampler.drop_last, sampler.shuffle) == (True, False)


def test_slice_sampler_without_replacement_keeps_every_argument():
    sampler = SliceSampler(
        replacement=False, slice_len=4, traj_key="episode", strict_length=False, shuffle=False
    )
    assert type(sampler) is SliceSamplerWithoutReplacement
    assert (sampler.slice_len, sampler.traj_key, sampler.strict_length) == (4, "episode", False)
    assert sampler.shuffle is False
    assert type(pickle.loads(pickle.dumps(sampler))) is SliceSamplerWithoutReplacement


def test_variants_accept_the_flag_and_subclasses_do_not_switch():
    assert type(SamplerWithoutReplacement(replacement=False)) is SamplerWithoutReplacement
    assert type(SliceSamplerWithoutReplacement(slice_len=2, replacement=False)) is (
        SliceSamplerWithoutReplacement
    )
    prioritized = PrioritizedSliceSampler(8, 0.6, 0.4, slice_len=2)
    assert type(prioritized) is PrioritizedSliceSampler


@pytest.mark.parametrize(
    "build",
    [
        lambda: PrioritizedSampler(8, 0.6, 0.4, replacement=False),
        lambda: PrioritizedSliceSampler(8, 0.6, 0.4, slice_len=2, replacement=False),
    ],
)
def test_prioritized_samplers_have_no_variant(build):
    with pytest.raises(TypeError, match="no without-replacement variant"):
        build()


def test_replacement_must_be_a_bool():
    with pytest.raises(TypeError, match="replacement"):
        RandomSampler(replacement=0)


def test_an_epoch_visits_every_element_once():
    torch.manual_seed(1)
    rb = ReplayBuffer(
        storage=LazyTensorStorage(7), sampler=RandomSampler(replacement=False), batch_size=3
    )
    rb.extend(TensorDict({"a": torch.arange(7)}, [7]))
    seen = [value for _ in range(3) for value in rb.sample()["a"].tolist()]
    assert sorted(seen) == list(range(7))
