"""Per-slot write counters ("generations") shared by every writer of one storage.

A slot's generation is ``-1`` until the slot is first written, then counts the
writes it received (``0`` after the first).  Emptying the storage advances every
written slot, so handles taken before :meth:`~rl_replay.ReplayBuffer.empty` read
as stale.  The counters live on the storage object: two buffers writing into one
storage see each other's overwrites.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["SlotGenerations", "generations_on"]

_ATTRIBUTE = "_slot_generation_counters"


class SlotGenerations:
    """Counters of writes per cursor-dim slot, grown geometrically on demand."""

    def __init__(self) -> None:
        self.counts = torch.full((0,), -1, dtype=torch.int64)

    def _fit(self, high: int) -> None:
        size = self.counts.numel()
        if high < size:
            return
        grown = torch.full((max(high + 1, 2 * size, 16),), -1, dtype=torch.int64)
        grown[:size] = self.counts
        self.counts = grown

    def stamp(self, slots: torch.Tensor | int) -> None:
        """Count one write per entry of ``slots`` (repeated slots count several times)."""
        slots = torch.as_tensor(slots, dtype=torch.int64).reshape(-1)
        if not slots.numel():
            return
        self._fit(int(slots.max()))
        self.counts.index_add_(0, slots, torch.ones_like(slots))

    def advance_written(self) -> None:
        """Advance every written slot by one (the storage was emptied)."""
        written = self.counts >= 0
        self.counts[written] += 1

    def of(self, slots: torch.Tensor) -> torch.Tensor:
        """The generation of each slot; ``-1`` for never written or out-of-range slots."""
        slots = torch.as_tensor(slots, dtype=torch.int64)
        size = self.counts.numel()
        valid = (slots >= 0) & (slots < size)
        safe = torch.where(valid, slots, torch.zeros_like(slots))
        found = self.counts[safe] if size else torch.full_like(slots, -1)
        return torch.where(valid, found, torch.full_like(slots, -1))

    def load(self, counts: torch.Tensor) -> None:
        self.counts = counts.to(torch.int64).reshape(-1).clone()


def generations_on(storage: Any, create: bool = False) -> SlotGenerations | None:
    """The counters attached to ``storage`` (attached first when ``create``)."""
    found = getattr(storage, _ATTRIBUTE, None)
    if found is None and create and storage is not None:
        found = SlotGenerations()
        setattr(storage, _ATTRIBUTE, found)
    return found
