"""Storage checkpointers: how a storage is written to and read from disk."""

from __future__ import annotations

from rl_replay.checkpointers.base import StorageCheckpointerBase
from rl_replay.checkpointers.ensemble import StorageEnsembleCheckpointer
from rl_replay.checkpointers.h5 import H5StorageCheckpointer
from rl_replay.checkpointers.list import ListStorageCheckpointer
from rl_replay.checkpointers.ted import FlatStorageCheckpointer, NestedStorageCheckpointer
from rl_replay.checkpointers.tensor import TensorStorageCheckpointer

__all__ = [
    "FlatStorageCheckpointer",
    "H5StorageCheckpointer",
    "NestedStorageCheckpointer",
    "ListStorageCheckpointer",
    "StorageCheckpointerBase",
    "StorageEnsembleCheckpointer",
    "TensorStorageCheckpointer",
]
