"""A shard's staged writes in one preallocated block: one copy per leaf, one buffer per flush.

A ``write_behind`` :class:`~rl_replay.RayReplayBuffer` must copy each staged write
(the caller may change its tensors afterwards); :class:`StagingBlock` makes that
copy the only work: the first write of a shard allocates, for each leaf, room for
``rows`` items of its layout, and every write of that layout copies each leaf
into the next free rows (one ``copy_`` per leaf, no packing). A flush hands
:meth:`StagingBlock.take` to ``ray.put`` (the written rows of each leaf as views,
copied once into the object store, after which the block takes new writes) and
the shard writes them with one local ``extend`` (:func:`unpack_block`).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from rl_replay._ray_transport import CHUNK

__all__ = ["StagingBlock", "block_count", "unpack_block"]

_TENSOR = None  # the key of a plain tensor's one leaf


def _leaves(data: Any) -> list[tuple[Any, Any]] | None:
    """``[(key, tensor)]`` of a batch a block can hold, or ``None``."""
    if isinstance(data, torch.Tensor):
        return [(_TENSOR, data)] if data.ndim and not data.is_sparse else None
    if isinstance(data, TensorDictBase) and data.batch_dims:
        leaves = list(data.items(True, True))
        if leaves and all(isinstance(value, torch.Tensor) for _, value in leaves):
            return leaves
    return None


class StagingBlock:
    """Preallocated rows for the staged writes of one shard, of one layout.

    Args:
        data (Tensor or TensorDictBase): the first write; gives the layout (keys,
            dtypes, trailing shapes) of the writes the block takes.
        rows (int): items the block holds.

    Examples:
        >>> block = StagingBlock.build(torch.arange(3), writes=4)
        >>> block.add(torch.arange(3)), block.add(torch.arange(2, dtype=torch.float))
        (True, False)
        >>> unpack_block(block.take())[0].tolist()
        [0, 1, 2]
    """

    def __init__(self, data: Any, rows: int) -> None:
        leaves = _leaves(data)
        if leaves is None:
            raise ValueError(
                f"StagingBlock expected a tensor or a tensordict of tensors with a batch "
                f"dim, got {type(data).__name__}."
            )
        self.tail = tuple(data.shape[1:]) if isinstance(data, torch.Tensor) else None
        self.batch_tail = None if self.tail is not None else tuple(data.batch_size[1:])
        self.keys = [key for key, _ in leaves]
        self.dsts = [
            torch.empty((rows, *value.shape[1:]), dtype=value.dtype) for _, value in leaves
        ]
        self.table = [
            (key, dst.numpy().dtype.str, tuple(dst.shape[1:]))
            for key, dst in zip(self.keys, self.dsts, strict=True)
        ]
        self.rows, self.used, self.sizes = rows, 0, []
        self._init_views()

    def _init_views(self) -> None:
        # what each leaf must be: (key, dtype, trailing shape)
        self.specs = [(k, dst.dtype, dst.shape[1:]) for k, dst in zip(self.keys, self.dsts)]
        self.views: dict[tuple[int, int], list[torch.Tensor]] = {}  # (start, n) -> leaf rows

    @staticmethod
    def takes(data: Any) -> bool:
        """Whether a block can hold ``data`` (tensors of dtypes numpy has, a batch dim)."""
        leaves = _leaves(data)
        return leaves is not None and not any(
            value.dtype in (torch.bfloat16, torch.complex32) for _, value in leaves
        )  # no numpy view of these: they travel packed

    @classmethod
    def build(cls, data: Any, writes: int) -> StagingBlock | None:
        """A block for ``writes`` writes like ``data``, or ``None`` if it cannot hold it."""
        if not cls.takes(data):
            return None
        return cls(data, max(1, writes) * max(1, int(data.shape[0])))

    def empty_like(self) -> StagingBlock:
        """Another block of this layout and size (its rows are allocated, not written)."""
        other = object.__new__(StagingBlock)
        other.tail, other.batch_tail, other.keys = self.tail, self.batch_tail, self.keys
        other.dsts = [torch.empty_like(dst) for dst in self.dsts]
        other.table, other.rows, other.used, other.sizes = self.table, self.rows, 0, []
        other._init_views()
        return other

    def same_layout(self, other: StagingBlock) -> bool:
        """Whether ``other`` holds the same writes (layout and rows) as this block."""
        return (self.table, self.batch_tail, self.rows) == (
            other.table,
            other.batch_tail,
            other.rows,
        )

    def add(self, data: Any) -> bool:
        """Copy ``data`` into the next free rows; ``False`` (nothing kept) if it does not fit."""
        n = int(data.shape[0]) if data.ndim else 0
        if not n or self.used + n > self.rows:
            return False
        if self.tail is not None:
            if not isinstance(data, torch.Tensor):
                return False
            pairs = [(_TENSOR, data)]
        elif isinstance(data, TensorDictBase) and tuple(data.batch_size[1:]) == self.batch_tail:
            pairs = list(data.items(True, True))
        else:
            return False
        if len(pairs) != len(self.dsts):
            return False
        start, stop = self.used, self.used + n
        # the rows of a write, as views made once per block (writes of one size reuse them)
        views = self.views.get((start, n))
        if views is None:
            if len(self.views) > max(64, 2 * self.rows // n):
                self.views.clear()  # writes of many sizes: do not keep them all
            views = self.views[(start, n)] = [dst[start:stop] for dst in self.dsts]
        for (key, value), (want, dtype, tail), view in zip(pairs, self.specs, views, strict=True):
            if (
                key != want
                or not isinstance(value, torch.Tensor)
                or value.dtype != dtype
                or value.shape[1:] != tail
            ):
                return False  # rows past self.used are free: nothing to undo
            view.copy_(value)
        self.used = stop
        self.sizes.append(n)
        return True

    def take(self) -> tuple[Any, ...]:
        """The written rows (views of the block, for ``ray.put``); the block is empty again.

        The views must be copied (``ray.put`` does) before the next :meth:`add`.
        """
        leaves = []
        for dst in self.dsts:
            flat = dst[: self.used].numpy().reshape(-1).view(np.uint8)
            leaves.append([flat[i : i + CHUNK] for i in range(0, flat.size, CHUNK)])
        out = ("__block__", self.batch_tail, self.table, leaves, list(self.sizes))
        self.used, self.sizes = 0, []
        return out


def block_count(payload: tuple[Any, ...]) -> int:
    """The items of a :meth:`StagingBlock.take` payload."""
    return sum(payload[4])


def unpack_block(
    payload: tuple[Any, ...], scratch: dict[int, np.ndarray] | None = None
) -> tuple[Any, list[int]]:
    """``(batch, sizes)``: the rows of a :meth:`StagingBlock.take` payload.

    Without ``scratch`` the batch is one writable copy. With it (a dict the caller
    keeps between calls) the batch is only valid until the next call and must only
    be read: a leaf that came in one buffer is a read-only view of it (no copy), a
    leaf cut in chunks is joined into a buffer of ``scratch`` reused from call to
    call (no fresh allocation, whose pages the kernel would fault in and zero).
    """
    _, batch_tail, table, leaves, sizes = payload
    total = sum(sizes)
    tensors = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch: the view is not writable
        for leaf, ((_, dtype, shape), chunks) in enumerate(zip(table, leaves, strict=True)):
            if len(chunks) == 1:
                # the object store's memory is read-only: a view if only read, else a copy
                flat = chunks[0] if scratch is not None else chunks[0].copy()
            elif not chunks:
                flat = np.zeros(0, dtype=np.uint8)
            elif scratch is not None:
                nbytes = sum(chunk.size for chunk in chunks)
                buffer = scratch.get(leaf)
                if buffer is None or buffer.size < nbytes:
                    buffer = scratch[leaf] = np.empty(nbytes, dtype=np.uint8)
                flat = np.concatenate(chunks, out=buffer[:nbytes])
            else:
                flat = np.concatenate(chunks)
            tensors.append(torch.from_numpy(flat.view(np.dtype(dtype)).reshape(total, *shape)))
    if batch_tail is None:
        return tensors[0], sizes
    td = TensorDict(batch_size=(total, *batch_tail))
    for (key, _, _), tensor in zip(table, tensors, strict=True):
        td.set(key, tensor)
    return td, sizes
