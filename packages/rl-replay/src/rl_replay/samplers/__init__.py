"""Samplers: which storage positions a replay buffer reads."""

from __future__ import annotations

from rl_replay.samplers._ensemble import SamplerEnsemble
from rl_replay.samplers._prioritized import PrioritizedSampler
from rl_replay.samplers._prioritized_slice import PrioritizedSliceSampler
from rl_replay.samplers._random import RandomSampler
from rl_replay.samplers._slice import SliceSampler
from rl_replay.samplers._slice_without_replacement import SliceSamplerWithoutReplacement
from rl_replay.samplers._without_replacement import SamplerWithoutReplacement
from rl_replay.samplers.base import Sampler

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
