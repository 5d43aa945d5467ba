"""Storages: the containers replay buffers write into."""

from __future__ import annotations

from rl_replay.storages.base import Storage
from rl_replay.storages.list import ListStorage
from rl_replay.storages.memmap import LazyMemmapStorage
from rl_replay.storages.tensor import LazyTensorStorage, TensorStorage

__all__ = ["LazyMemmapStorage", "LazyTensorStorage", "ListStorage", "Storage", "TensorStorage"]
