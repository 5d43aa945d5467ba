"""Epoch-based sampling without replacement: :class:`SamplerWithoutReplacement`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from rl_replay.samplers.base import (
    Sampler,
    check_batch_size,
    check_not_empty,
    device_of,
    unravel,
)

__all__ = ["Epoch", "SamplerWithoutReplacement"]


class SamplerWithoutReplacement(Sampler):
    """A data-consuming sampler that ensures that the same sample is not present in consecutive batches.

    Each epoch visits every valid element once, in a random order when ``shuffle`` is
    ``True`` and in storage order otherwise. When the epoch is exhausted, :attr:`ran_out`
    becomes ``True`` and the next call starts a new epoch. An epoch also restarts when
    the storage length changed since it began.

    Args:
        drop_last (bool, optional): if ``True``, the last batch of an epoch is dropped
            when it would be smaller than ``batch_size``. Defaults to ``False``.
        shuffle (bool, optional): visit the elements in random order. Defaults to ``True``.

    Examples:
        >>> import torch
        >>> from rl_replay.samplers import SamplerWithoutReplacement
        >>> class Storage:
        ...     ndim = 1
        ...     def __len__(self):
        ...         return 5
        >>> sampler = SamplerWithoutReplacement(shuffle=False)
        >>> sampler.sample(Storage(), 3)[0]
        tensor([0, 1, 2])
        >>> sampler.sample(Storage(), 3)[0], sampler.ran_out
        (tensor([3, 4]), True)
    """

    def __init__(self, drop_last: bool = False, shuffle: bool = True) -> None:
        super().__init__()
        self.drop_last = drop_last
        self.shuffle = shuffle
        self._epoch = Epoch(drop_last=drop_last, shuffle=shuffle)

    @property
    def ran_out(self) -> bool:  # type: ignore[override]
        """Whether the last batch exhausted the epoch."""
        return self._epoch.ran_out

    @ran_out.setter
    def ran_out(self, value: bool) -> None:
        self._epoch.ran_out = value

    def sample(self, storage: Any, batch_size: int) -> tuple[Any, dict[str, Any]]:
        """Draw the next ``batch_size`` unvisited elements of the epoch.

        Raises:
            ValueError: if ``batch_size`` is not a positive int, or if
                ``drop_last=True`` and the storage holds fewer than ``batch_size``
                elements (no full batch exists).
            RuntimeError: if the storage is empty.
        """
        owner = type(self).__name__
        check_batch_size(batch_size, owner)
        numel = len(storage)
        check_not_empty(numel, owner)
        with self._lock:
            index = self._epoch.take(
                numel, batch_size, key=numel, device=device_of(storage), owner=owner
            )
        return unravel(index, storage), {}

    def _empty(self) -> None:
        with self._lock:
            self._epoch.reset()

    def state_dict(self) -> dict[str, Any]:
        """Return the epoch position: the elements still to visit and ``ran_out``."""
        return self._epoch.state_dict()

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore the state returned by :meth:`state_dict`."""
        self._epoch.load_state_dict(state_dict)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(drop_last={self.drop_last}, shuffle={self.shuffle})"


class Epoch:
    """The order in which an epoch visits ``numel`` items, consumed batch by batch.

    A new epoch starts when the previous one ran out or when ``key`` (what the items
    are: a storage length, a version) differs from the key the epoch was built for.
    """

    def __init__(self, *, drop_last: bool, shuffle: bool) -> None:
        self.drop_last = drop_last
        self.shuffle = shuffle
        self.ran_out = False
        self._remaining: torch.Tensor | None = None
        self._key = -1

    def take(
        self, numel: int, count: int, *, key: int, device: torch.device, owner: str
    ) -> torch.Tensor:
        """The next ``count`` (or fewer, at the end of an epoch) item numbers."""
        if self.drop_last and numel < count:
            raise ValueError(
                f"{owner}(drop_last=True) expected at least {count} items to draw a full batch, "
                f"found {numel}. Lower the batch size or pass drop_last=False."
            )
        if self._remaining is None or self._key != key:
            order = (
                torch.randperm(numel, device=device)
                if self.shuffle
                else torch.arange(numel, device=device)
            )
            self._remaining, self._key, self.ran_out = order, key, False
        index = self._remaining[:count]
        self._remaining = self._remaining[count:]
        left = self._remaining.numel()
        if left == 0 or (self.drop_last and left < count):
            self.ran_out = True
            self._remaining = None
        return index

    def reset(self) -> None:
        """Forget the current epoch."""
        self._remaining, self._key, self.ran_out = None, -1, False

    def state_dict(self) -> dict[str, Any]:
        """The items still to visit, the epoch key and ``ran_out``."""
        state: dict[str, Any] = {"key": self._key, "ran_out": self.ran_out}
        if self._remaining is not None:
            state["remaining"] = self._remaining.clone()
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        remaining = state.get("remaining")
        self._remaining = None if remaining is None else torch.as_tensor(remaining).long()
        self._key = int(state["key"])
        self.ran_out = bool(state["ran_out"])
