"""Epoch bookkeeping shared by the samplers that draw without replacement."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

__all__ = ["Epoch", "EpochSampling"]


class EpochSampling:
    """Mixin: :attr:`ran_out` read from and written to the sampler's :class:`Epoch`."""

    _epoch: Epoch

    @property
    def ran_out(self) -> bool:
        """Whether the last batch exhausted the epoch."""
        return self._epoch.ran_out

    @ran_out.setter
    def ran_out(self, value: bool) -> None:
        self._epoch.ran_out = value


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
            self._remaining, self._key = self._order(numel, device), key
        self.ran_out = False
        index = self._remaining[:count]
        self._remaining = self._remaining[count:]
        left = self._remaining.numel()
        if left == 0 or (self.drop_last and left < count):
            self.ran_out = True
            # the next epoch's order is drawn now, as TorchRL does (same random stream)
            self._remaining = self._order(numel, device)
        return index

    def _order(self, numel: int, device: torch.device) -> torch.Tensor:
        if self.shuffle:
            return torch.randperm(numel, device=device)
        return torch.arange(numel, device=device)

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
