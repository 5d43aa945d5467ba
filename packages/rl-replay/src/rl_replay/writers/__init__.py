"""Writers: decide where a replay buffer writes new data."""

from __future__ import annotations

from rl_replay.writers.base import Writer
from rl_replay.writers.immutable import ImmutableDatasetWriter
from rl_replay.writers.max_value import TensorDictMaxValueWriter
from rl_replay.writers.round_robin import RoundRobinWriter, TensorDictRoundRobinWriter

__all__ = [
    "ImmutableDatasetWriter",
    "RoundRobinWriter",
    "TensorDictMaxValueWriter",
    "TensorDictRoundRobinWriter",
    "Writer",
]
