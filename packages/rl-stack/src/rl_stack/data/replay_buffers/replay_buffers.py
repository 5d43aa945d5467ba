"""Buffer classes, as ``torchrl.data.replay_buffers.replay_buffers``: re-exports only."""

from __future__ import annotations

from rl_replay import (
    PrioritizedReplayBuffer,
    ReplayBuffer,
    ReplayBufferEnsemble,
    TensorDictPrioritizedReplayBuffer,
    TensorDictReplayBuffer,
)

__all__ = [
    "PrioritizedReplayBuffer",
    "ReplayBuffer",
    "ReplayBufferEnsemble",
    "TensorDictPrioritizedReplayBuffer",
    "TensorDictReplayBuffer",
]
