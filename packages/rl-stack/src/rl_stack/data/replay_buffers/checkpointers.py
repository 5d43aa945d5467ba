"""Checkpointers, as ``torchrl.data.replay_buffers.checkpointers``: re-exports only."""

from __future__ import annotations

from rl_replay import (
    FlatStorageCheckpointer,
    H5StorageCheckpointer,
    ListStorageCheckpointer,
    NestedStorageCheckpointer,
    StorageCheckpointerBase,
    StorageEnsembleCheckpointer,
    TensorStorageCheckpointer,
)

__all__ = [
    "FlatStorageCheckpointer",
    "H5StorageCheckpointer",
    "ListStorageCheckpointer",
    "NestedStorageCheckpointer",
    "StorageCheckpointerBase",
    "StorageEnsembleCheckpointer",
    "TensorStorageCheckpointer",
]
