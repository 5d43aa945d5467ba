"""The python-list storage :class:`ListStorage`."""

from __future__ import annotations

import multiprocessing
import sys
from typing import Any

import torch
from tensordict import is_tensor_collection

from rl_replay import _td
from rl_replay.checkpointers.list import ListStorageCheckpointer
from rl_replay.storages.base import Storage

__all__ = ["ListStorage"]


class ListStorage(Storage):
    """A storage stored in a list.

    Any python object can be stored; this is the most flexible and the slowest
    storage.

    Args:
        max_size (int, optional): the capacity. Defaults to ``None`` (unbounded).
        compilable (bool, optional): accepted for API compatibility. Defaults to ``False``.

    Raises:
        ValueError: if ``max_size`` is given and is not a positive int.
        RuntimeError: when handed to a process being started (a list cannot be shared
            between processes; use a tensor storage).

    Examples:
        >>> from rl_replay import ReplayBuffer, ListStorage
        >>> rb = ReplayBuffer(storage=ListStorage(10))
        >>> rb.add("a string!") # first element will be a string
        0
        >>> rb.extend([30, None])  # element [1] is an int, [2] is None
        tensor([1, 2])
        >>> len(rb), rb[0], rb[2]
        (3, 'a string!', None)
    """

    _default_checkpointer = ListStorageCheckpointer

    def __init__(self, max_size: int | None = None, *, compilable: bool = False) -> None:
        super().__init__(sys.maxsize if max_size is None else max_size, compilable=compilable)
        self._storage: list[Any] = []

    def __len__(self) -> int:
        return len(self._storage)

    def set(self, cursor: Any, data: Any, *, set_cursor: bool = True) -> None:
        """Write ``data`` at ``cursor`` (an int, or a sequence of positions for a sequence of items).

        Positions may come in any order (a writer wrapping around writes ``[2, 0, 1]``)
        as long as, once the whole write is done, the stored items still form one block
        ``0..len-1``: a position past the end must be filled by the same write.

        Raises:
            ValueError: if the number of positions and items differ, a position is
                negative or not below ``max_size``, or the write would leave a gap
                after the last stored item (nothing is written then).
        """
        if isinstance(cursor, int) or (isinstance(cursor, torch.Tensor) and cursor.ndim == 0):
            positions, items = [int(cursor)], [data]
        else:
            positions = _positions(cursor, len(self._storage))
            items = list(data)
            if len(positions) != len(items):
                raise ValueError(
                    f"ListStorage expected {len(positions)} items for {len(positions)} "
                    f"positions, found {len(items)}. Pass one item per position."
                )
        if not positions:
            return
        length = len(self._storage)
        low, high = min(positions), max(positions)
        if low < 0 or high >= self.max_size:
            bad = low if low < 0 else high
            raise ValueError(
                f"ListStorage expected positions in [0, max_size={self.max_size}), got {bad}. "
                "Write inside the capacity (a RoundRobinWriter wraps around for you)."
            )
        if high >= length:
            missing = set(range(length, high + 1)).difference(positions)
            if missing:
                raise ValueError(self._gap_message(min(missing), high))
            self._storage.extend([None] * (high + 1 - length))
        for pos, item in zip(positions, items, strict=True):
            self._storage[pos] = item

    def _gap_message(self, gap: int, pos: int) -> str:
        return (
            f"ListStorage can write at positions 0..{len(self._storage)}, got {pos}, which "
            f"would leave position {gap} empty. Write positions in order without gaps."
        )

    def get(self, index: Any) -> Any:  # Any: the stored python objects
        """Return one item for an int index, else a list of items.

        Raises:
            IndexError: if an index is out of range.
        """
        if isinstance(index, int):
            return self._storage[index]
        if isinstance(index, slice):
            return self._storage[index]
        return [self._storage[i] for i in _positions(index, len(self._storage))]

    def _empty(self) -> None:
        self._storage = []

    def __getstate__(self) -> dict[str, Any]:
        if multiprocessing.context.get_spawning_popen() is not None:
            raise RuntimeError(
                f"Cannot share a storage of type {type(self).__name__} between processes: a "
                "python list lives in one process, so the other process would write into its "
                "own copy and the rows would be lost. Use LazyTensorStorage or "
                "LazyMemmapStorage for a buffer shared between processes."
            )
        return super().__getstate__()

    def state_dict(self) -> dict[str, Any]:
        return {"_storage": list(self._storage)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the items of :meth:`state_dict`; tensors are copied, not shared with it."""
        self._storage = [_td.tree_map(_copy_tensor, item) for item in state_dict["_storage"]]


def _copy_tensor(leaf: Any) -> Any:  # Any: a leaf of a stored item
    return leaf.clone() if isinstance(leaf, torch.Tensor) or is_tensor_collection(leaf) else leaf


def _positions(index: Any, length: int) -> list[int]:
    if isinstance(index, slice):
        stop = length if index.stop is None else max(length, index.stop)
        return list(range(*index.indices(stop)))
    if isinstance(index, torch.Tensor):
        return index.reshape(-1).tolist()
    return [int(i) for i in index]
