"""Circular writers: :class:`RoundRobinWriter` and :class:`TensorDictRoundRobinWriter`."""

from __future__ import annotations

import multiprocessing
from typing import Any

import torch
from tensordict import is_tensor_collection

from rl_replay.storages._generations import generations_on
from rl_replay.storages.base import Storage
from rl_replay.writers.base import Writer, _batch_len, _take_last

__all__ = ["RoundRobinWriter", "TensorDictRoundRobinWriter"]


class RoundRobinWriter(Writer):
    """A RoundRobin Writer class for composable replay buffers.

    New data goes after the last written element; once the storage is full the
    oldest elements are overwritten first.  The cursor lives in shared memory,
    so a buffer passed to another process keeps writing where it left off.

    Args:
        compilable (bool, optional): accepted for API compatibility. Defaults to ``False``.
        track_generations (bool, optional): stamp every storage slot with a
            generation counter (see :meth:`~rl_replay.Writer.generations_of`):
            samples then carry an ``"index_generation"`` entry next to ``"index"``
            and :meth:`~rl_replay.ReplayBuffer.update_if_present` can tell a live
            record from a recycled slot.  The counters live on the storage, so
            every buffer writing into it advances them.  Defaults to ``False``.

    Examples:
        >>> import torch
        >>> from rl_replay import ReplayBuffer, LazyTensorStorage, RoundRobinWriter
        >>> rb = ReplayBuffer(storage=LazyTensorStorage(4), writer=RoundRobinWriter())
        >>> rb.extend(torch.arange(6))  # the first two are overwritten
        tensor([2, 3, 0, 1])
        >>> rb[:]
        tensor([4, 5, 2, 3])
    """

    def __init__(self, compilable: bool = False, *, track_generations: bool = False) -> None:
        super().__init__(compilable=compilable)
        if not isinstance(track_generations, bool):
            raise TypeError(
                f"{type(self).__name__} expected track_generations to be a bool, got "
                f"{track_generations!r}."
            )
        self._track_generations = track_generations
        self._cursor_value = torch.zeros((), dtype=torch.long).share_memory_()
        # processes the buffer is handed to share the cursor: claiming rows and writing
        # them must be one step across processes, or two collectors write the same rows
        self._write_lock = multiprocessing.get_context("spawn").Lock()  # crosses fork and spawn

    @property
    def _cursor(self) -> int:
        return int(self._cursor_value)

    @_cursor.setter
    def _cursor(self, value: int) -> None:
        self._cursor_value.fill_(value)

    def register_storage(self, storage: Storage) -> None:
        """Bind the writer to ``storage`` (adopting generation counters already on it)."""
        super().register_storage(storage)
        if self._track_generations:
            generations_on(storage, create=True)

    def _rows(self, data: Any, single: bool) -> int:
        storage = self._require_storage()
        prepare = getattr(storage, "_rows_for_write", None)
        return storage.max_size if prepare is None else prepare(data, single)

    def add(self, data: Any) -> Any:  # Any: any data the storage accepts
        """Write one element at the cursor and return its position."""
        with self._write_lock:
            rows = self._rows(data, True)
            cursor = self._cursor
            self._storage.set(cursor, data)
            self._cursor = (cursor + 1) % rows
            counters = generations_on(self._storage)
            if counters is not None:
                counters.stamp(cursor)
        return cursor

    def extend(self, data: Any) -> Any:  # Any: see add
        """Write a batch along its leading dim after the cursor, wrapping around.

        When the batch is longer than the storage, only its last elements are kept.
        """
        count = _batch_len(data)
        with self._write_lock:
            rows = self._rows(data, False)
            cursor = self._cursor
            end = cursor + count
            counters = generations_on(self._storage)
            if counters is not None:  # one stamp per write, even for rows dropped by the wrap
                counters.stamp(torch.arange(cursor, end) % rows)
            if count > rows:  # only the last `rows` elements survive the wrap-around
                data, cursor = _take_last(data, rows), end - rows
            index = torch.arange(cursor, end) % rows
            # a contiguous block is written through a slice: one plain copy per leaf
            self._storage.set(slice(cursor, end) if end <= rows else index, data)
            self._cursor = end % rows
        return index

    def _empty(self) -> None:
        self._cursor = 0

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"_cursor": self._cursor}
        counters = generations_on(self._storage) if self._track_generations else None
        if counters is not None:
            state["_generation"] = counters.counts.clone()
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the cursor.

        Raises:
            ValueError: if the saved cursor is not a non-negative int (nothing changes then).
        """
        cursor = state_dict["_cursor"]
        if (
            isinstance(cursor, torch.Tensor)
            and cursor.numel() == 1
            and not cursor.is_floating_point()
        ):
            cursor = int(cursor)
        if isinstance(cursor, bool) or not isinstance(cursor, int) or cursor < 0:
            raise ValueError(
                f"{type(self).__name__}.load_state_dict expected '_cursor' to be an int >= 0, got "
                f"{cursor!r}. Pass a state returned by state_dict()."
            )
        generations = state_dict.get("_generation")
        if generations is not None and not (
            isinstance(generations, torch.Tensor) and generations.ndim == 1
        ):
            raise ValueError(
                f"{type(self).__name__}.load_state_dict expected '_generation' to be a 1-dim "
                f"tensor, got {generations!r}. Pass a state returned by state_dict()."
            )
        self._cursor = cursor
        if generations is not None and self._track_generations and self._storage is not None:
            generations_on(self._storage, create=True).load(generations)


class TensorDictRoundRobinWriter(RoundRobinWriter):
    """A RoundRobin Writer class for composable, tensordict-based replay buffers.

    Behaves like :class:`RoundRobinWriter` and only accepts tensor collections.

    Args:
        compilable (bool, optional): accepted for API compatibility. Defaults to ``False``.

    Raises:
        TypeError: when asked to write something other than a tensordict.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rl_replay import LazyTensorStorage, TensorDictReplayBuffer, TensorDictRoundRobinWriter
        >>> rb = TensorDictReplayBuffer(storage=LazyTensorStorage(8), writer=TensorDictRoundRobinWriter())
        >>> rb.extend(TensorDict({"a": torch.zeros(3)}, [3]))
        tensor([0, 1, 2])
    """

    def add(self, data: Any) -> Any:  # Any: a tensordict
        _check_td(data)
        return super().add(data)

    def extend(self, data: Any) -> Any:  # Any: a tensordict
        _check_td(data)
        return super().extend(data)


def _check_td(data: Any) -> None:
    if not is_tensor_collection(data):
        raise TypeError(
            f"TensorDictRoundRobinWriter expected a tensordict, got {type(data).__name__}. "
            "Use RoundRobinWriter for tensors and pytrees."
        )
