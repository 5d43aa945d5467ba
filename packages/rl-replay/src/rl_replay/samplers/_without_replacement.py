"""Epoch-based sampling without replacement: :class:`SamplerWithoutReplacement`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rl_replay.samplers._epoch import Epoch, EpochSampling
from rl_replay.samplers.base import (
    Sampler,
    check_batch_size,
    check_not_empty,
    device_of,
    unravel,
)

__all__ = ["SamplerWithoutReplacement"]


class SamplerWithoutReplacement(EpochSampling, Sampler):
    """A data-consuming sampler that ensures that the same sample is not present in consecutive batches.

    Each epoch visits every valid element once, in a random order when ``shuffle`` is
    ``True`` and in storage order otherwise. When the epoch is exhausted, :attr:`ran_out`
    becomes ``True`` and the next call starts a new epoch. An epoch also restarts when
    the storage length changed since it began.

    Args:
        drop_last (bool, optional): if ``True``, the last batch of an epoch is dropped
            when it would be smaller than ``batch_size``. Defaults to ``False``.
        shuffle (bool, optional): visit the elements in random order. Defaults to ``True``.
        replacement (bool, optional): accepted for symmetry with
            ``RandomSampler(replacement=False)``; ignored. Defaults to ``False``.

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

    def __init__(
        self, drop_last: bool = False, shuffle: bool = True, *, replacement: bool = False
    ) -> None:
        super().__init__()
        self.drop_last = drop_last
        self.shuffle = shuffle
        self._epoch = Epoch(drop_last=drop_last, shuffle=shuffle)

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
