"""Sampling that consumes elements: the sampler behind ``ReplayBuffer(consume_after_n_samples=n)``.

Each stored slot counts how often it was sampled; after ``n`` times it leaves
the sampleable set and its slot goes to a FIFO of free slots, which the buffer
fills before moving the writer's cursor.  A batch holds distinct elements and
may be shorter than asked for when fewer are left.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from rl_replay.samplers.base import Sampler, check_batch_size

__all__ = ["ConsumeAfterN"]


class ConsumeAfterN(Sampler):
    """Uniform sampling without replacement inside a batch; slots retire after ``n`` draws.

    Args:
        max_sample_count (int): how many times an element can be sampled.

    Examples:
        >>> import torch
        >>> from rl_replay import ListStorage, ReplayBuffer
        >>> rb = ReplayBuffer(storage=ListStorage(8), consume_after_n_samples=1)
        >>> rb.extend([torch.tensor(i) for i in range(3)])
        tensor([0, 1, 2])
        >>> len(rb.sample(2)), len(rb)
        (2, 1)
        >>> rb.extend([torch.tensor(3)])  # fills a consumed slot first
        tensor([...])
        >>> len(rb)
        2
    """

    def __init__(self, max_sample_count: int) -> None:
        super().__init__()
        self.max_sample_count = max_sample_count
        self._reset()

    def _reset(self) -> None:
        self._counts = torch.zeros((0,), dtype=torch.int64)
        self._live = torch.zeros((0,), dtype=torch.bool)
        self._free: list[int] = []
        self._known = 0  # slots below this one have been seen (written or pre-stored)

    def _fit(self, size: int) -> None:
        if size <= self._live.numel():
            return
        grown = max(size, 2 * self._live.numel(), 16)
        live = torch.zeros((grown,), dtype=torch.bool)
        live[: self._live.numel()] = self._live
        counts = torch.zeros((grown,), dtype=torch.int64)
        counts[: self._counts.numel()] = self._counts
        self._live, self._counts = live, counts

    def _sync(self, storage: Any) -> None:
        """Slots the storage holds but the sampler never saw (pre-filled storages) are live."""
        rows = storage._len_along_dim0 if storage is not None else 0
        if rows > self._known:
            self._fit(rows)
            self._live[self._known : rows] = True
            self._known = rows

    def live_count(self, storage: Any) -> int:
        """The number of elements that can still be sampled."""
        with self._lock:
            self._sync(storage)
            return int(self._live.sum())

    def take_free(self, count: int) -> list[int]:
        """Pop up to ``count`` consumed slots, oldest first, for the next write."""
        with self._lock:
            taken, self._free = self._free[:count], self._free[count:]
            return taken

    def extend(self, index: torch.Tensor) -> None:
        index = torch.as_tensor(index, dtype=torch.int64).reshape(-1)
        if not index.numel():
            return
        with self._lock:
            self._sync(self._storage)
            self._fit(int(index.max()) + 1)
            self._live[index] = True
            self._counts[index] = 0
            self._known = max(self._known, int(index.max()) + 1)
            written = set(index.tolist())
            self._free = [slot for slot in self._free if slot not in written]

    def sample(self, storage: Any, batch_size: int) -> tuple[Any, dict[str, Any]]:
        """Draw up to ``batch_size`` distinct live slots and count the draw.

        Raises:
            RuntimeError: if no element is left to sample.
        """
        check_batch_size(batch_size, type(self).__name__)
        with self._lock:
            self._sync(storage)
            live = self._live.nonzero().squeeze(-1)
            if not live.numel():
                raise RuntimeError(
                    "Cannot sample from an empty storage: every stored element was consumed "
                    f"(consume_after_n_samples={self.max_sample_count}). Extend the buffer first."
                )
            index = live[torch.randperm(live.numel())[:batch_size]]
            self._counts[index] += 1
            spent = index[self._counts[index] >= self.max_sample_count]
            self._live[spent] = False
            self._free.extend(spent.tolist())
            self.ran_out = not bool(self._live.any())
        return index, {}

    def _empty(self) -> None:
        with self._lock:
            self._reset()

    def state_dict(self) -> dict[str, Any]:
        return {
            "max_sample_count": self.max_sample_count,
            "known": self._known,
            "counts": self._counts.clone(),
            "live": self._live.clone(),
            "free": torch.tensor(self._free, dtype=torch.int64),
        }

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore a state returned by :meth:`state_dict` (copies, never views, of it).

        Raises:
            KeyError: if an entry is missing.
            ValueError: if the counts and live mask differ in length.
        """
        counts, live = state_dict["counts"], state_dict["live"]
        if counts.shape != live.shape:
            raise ValueError(
                f"{type(self).__name__}.load_state_dict expected 'counts' and 'live' of one "
                f"length, got {tuple(counts.shape)} and {tuple(live.shape)}."
            )
        with self._lock:
            self.max_sample_count = int(state_dict["max_sample_count"])
            self._known = int(state_dict["known"])
            self._counts = counts.to(torch.int64).clone()
            self._live = live.to(torch.bool).clone()
            self._free = [int(slot) for slot in torch.as_tensor(state_dict["free"]).reshape(-1)]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(max_sample_count={self.max_sample_count})"
