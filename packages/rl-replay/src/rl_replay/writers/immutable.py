"""The read-only writer :class:`ImmutableDatasetWriter`."""

from __future__ import annotations

from typing import Any

from rl_replay.writers.base import Writer

__all__ = ["ImmutableDatasetWriter"]


class ImmutableDatasetWriter(Writer):
    """A blocking writer for immutable datasets.

    Every write raises: buffers built on top of a fixed dataset use it to make
    accidental writes loud.

    Args:
        compilable (bool, optional): accepted for API compatibility. Defaults to ``False``.

    Raises:
        RuntimeError: on :meth:`add` and :meth:`extend`.

    Examples:
        >>> import torch
        >>> from rl_replay import ImmutableDatasetWriter, ReplayBuffer, TensorStorage
        >>> rb = ReplayBuffer(storage=TensorStorage(torch.zeros(4)), writer=ImmutableDatasetWriter())
        >>> rb.add(torch.ones(()))
        Traceback (most recent call last):
        ...
        RuntimeError: ImmutableDatasetWriter cannot write: the dataset is immutable...
    """

    def add(self, data: Any) -> Any:  # Any: rejected whatever it is
        raise RuntimeError(self._message())

    def extend(self, data: Any) -> Any:  # Any: rejected whatever it is
        raise RuntimeError(self._message())

    def _message(self) -> str:
        return (
            "ImmutableDatasetWriter cannot write: the dataset is immutable, expected no writes, "
            "got one. Build the buffer with another writer (e.g. RoundRobinWriter) to write."
        )

    def _empty(self) -> None:
        return None
