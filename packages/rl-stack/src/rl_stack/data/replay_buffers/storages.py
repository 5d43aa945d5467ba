"""Storages, as ``torchrl.data.replay_buffers.storages``: re-exports only."""

from __future__ import annotations

from rl_replay import (
    LazyMemmapStorage,
    LazyTensorStorage,
    ListStorage,
    Storage,
    StorageEnsemble,
    TensorStorage,
)

__all__ = [
    "LazyMemmapStorage",
    "LazyTensorStorage",
    "ListStorage",
    "Storage",
    "StorageEnsemble",
    "TensorStorage",
]
