"""Writers, as ``torchrl.data.replay_buffers.writers``: re-exports only."""

from __future__ import annotations

from rl_replay import (
    ImmutableDatasetWriter,
    RoundRobinWriter,
    TensorDictMaxValueWriter,
    TensorDictRoundRobinWriter,
    Writer,
    WriterEnsemble,
)

__all__ = [
    "ImmutableDatasetWriter",
    "RoundRobinWriter",
    "TensorDictMaxValueWriter",
    "TensorDictRoundRobinWriter",
    "Writer",
    "WriterEnsemble",
]
