"""Samplers, as ``torchrl.data.replay_buffers.samplers``: re-exports only."""

from __future__ import annotations

from rl_replay import (
    PrioritizedSampler,
    PrioritizedSliceSampler,
    RandomSampler,
    Sampler,
    SamplerEnsemble,
    SamplerWithoutReplacement,
    SliceSampler,
    SliceSamplerWithoutReplacement,
)

__all__ = [
    "PrioritizedSampler",
    "PrioritizedSliceSampler",
    "RandomSampler",
    "Sampler",
    "SamplerEnsemble",
    "SamplerWithoutReplacement",
    "SliceSampler",
    "SliceSamplerWithoutReplacement",
]
