"""The rows written since a slice sampler last updated its trajectory boundaries.

Writes only queue their rows; the boundaries are brought up to date when sampling.
Blocks of consecutive rows, as a round-robin writer produces them (wrapping at the end
of the cursor dim), are kept as ``(start, stop)`` pairs and merged with the block before
them, so a writer that keeps appending costs ``O(1)`` memory however much it writes
between two samples; a block covering the whole ring makes everything before it moot.
Other writes are kept as tensors of rows.
"""

from __future__ import annotations

import torch

__all__ = ["WriteQueue"]


class WriteQueue:
    """Rows written since the last update, in write order.

    Examples:
        >>> import torch
        >>> queue = WriteQueue()
        >>> queue.push(torch.tensor([3, 4]), ring=5)
        >>> queue.push(torch.tensor([1, 2]), ring=5)  # not after row 4: a new block
        >>> queue.push(torch.tensor([3]), ring=5)  # continues [1, 2]
        >>> queue.push(torch.tensor([0, 2]), ring=5)  # not a block: kept as a tensor
        >>> queue.rows(5).tolist(), queue.loose
        ([3, 4, 1, 2, 3, 0, 2], 2)
        >>> queue.push(torch.tensor([3, 4, 0, 1, 2]), ring=5)  # the whole ring, wrapping
        >>> queue.rows(5).tolist(), queue.loose
        ([3, 4, 0, 1, 2], 0)
    """

    def __init__(self) -> None:
        self._items: list[torch.Tensor | tuple[int, int]] = []
        self.loose = 0  # rows held as tensors (what memory grows with)

    def __bool__(self) -> bool:
        return bool(self._items)

    def clear(self) -> None:
        """Forget every queued write."""
        self._items = []
        self.loose = 0

    def push(self, rows: torch.Tensor, *, ring: int | None) -> None:
        """Queue the written ``rows`` (1-d); ``ring`` is the size of the cursor dim, if known."""
        count = rows.numel()
        if count == 0:
            return
        if ring is not None and count <= ring:
            first = int(rows[0])
            block = torch.arange(first, first + count, device=rows.device)
            if first + count > ring:
                block = block.remainder_(ring)
            if 0 <= first < ring and torch.equal(rows, block):
                self._push_block(first, first + count, ring)
                return
        self._items.append(rows.clone())
        self.loose += count

    def _push_block(self, start: int, stop: int, ring: int) -> None:
        last = self._items[-1] if self._items else None
        if isinstance(last, tuple) and last[1] % ring == start:
            start, stop = last[0], last[1] + stop - start
            self._items.pop()
        if stop - start >= ring:  # every row is rewritten by this block: the rest is moot
            start = stop - ring
            self.clear()
        shift = start - start % ring
        self._items.append((start - shift, stop - shift))

    def rows(self, ring: int) -> torch.Tensor:
        """Every queued row, in write order (a row written twice appears twice)."""
        parts = [
            item if isinstance(item, torch.Tensor) else torch.arange(*item) % ring
            for item in self._items
        ]
        if len(parts) == 1:
            return parts[0]
        return torch.cat([part.to(parts[0].device) for part in parts])
