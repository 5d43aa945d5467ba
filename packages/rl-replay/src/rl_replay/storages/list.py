"""The python-list storage :class:`ListStorage`."""

from __future__ import annotations

import sys
from typing import Any

import torch
from tensordict import is_tensor_collection
from torch.utils import _pytree

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

        Raises:
            ValueError: if the number of positions and items differ, or a position
                leaves a gap after the last stored item.
        """
        if isinstance(cursor, int):
            self._set_one(cursor, data)
            return
        positions = _positions(cursor, len(self._storage))
        items = list(data)
        if len(positions) != len(items):
            raise ValueError(
                f"ListStorage expected {len(positions)} items for {len(positions)} positions, "
                f"found {len(items)}. Pass one item per position."
            )
        end = len(self._storage)
        for pos in positions:
            if pos > end:
                raise ValueError(self._gap_message(pos))
            end = max(end, pos + 1)
        for pos, item in zip(positions, items, strict=True):
            self._set_one(pos, item)

    def _set_one(self, cursor: int, item: Any) -> None:
        if cursor == len(self._storage):
            self._storage.append(item)
        elif cursor < len(self._storage):
            self._storage[cursor] = item
        else:
            raise ValueError(self._gap_message(cursor))

    def _gap_message(self, pos: int) -> str:
        return (
            f"ListStorage can write at positions 0..{len(self._storage)}, got {pos}. "
            "Write positions in order without gaps."
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

    def state_dict(self) -> dict[str, Any]:
        return {"_storage": list(self._storage)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the items of :meth:`state_dict`; tensors are copied, not shared with it."""
        self._storage = [_pytree.tree_map(_copy_tensor, item) for item in state_dict["_storage"]]


def _copy_tensor(leaf: Any) -> Any:  # Any: a leaf of a stored item
    return leaf.clone() if isinstance(leaf, torch.Tensor) or is_tensor_collection(leaf) else leaf


def _positions(index: Any, length: int) -> list[int]:
    if isinstance(index, slice):
        stop = length if index.stop is None else max(length, index.stop)
        return list(range(*index.indices(stop)))
    if isinstance(index, torch.Tensor):
        return index.reshape(-1).tolist()
    return [int(i) for i in index]
