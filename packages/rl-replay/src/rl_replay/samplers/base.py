"""The :class:`Sampler` base class and the checkpoint format shared by every sampler.

A sampler decides which storage positions a replay buffer reads. The buffer calls only
public methods: ``sampler.attach_storage(storage)`` once, ``sampler.check_write(data)``
before and ``sampler.extend(index)`` after every write (``index``: the cursor-dim
positions just written), ``sampler.sample(storage, batch_size)`` to draw ``(index,
info)``, and ``sampler.empty()`` when the storage is emptied. Subclasses implement
:meth:`Sampler.sample` and the ``_empty`` hook (TorchRL's extension point); the
underscore spellings ``_attach_storage`` / ``_check_write`` still work.

Checkpoints (:meth:`Sampler.dumps`) are a directory holding ``sampler_meta.json`` (class
name and JSON-able state) and, when the state has tensors, checksummed tensor files under
``tensors/`` (see ``rl_replay.checkpointers._state``). Loading never unpickles anything.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from rl_replay.checkpointers._state import dump_state, load_state

__all__ = ["Sampler"]


class Sampler(abc.ABC):
    """A generic sampler base class for composable Replay Buffers.

    Subclasses implement :meth:`sample`, :meth:`state_dict`, :meth:`load_state_dict`
    and ``_empty`` (behind :meth:`empty`); :meth:`attach_storage` and :meth:`check_write`
    may be overridden; write hooks (:meth:`add`, :meth:`extend`) and priority hooks
    (:meth:`update_priority`, :meth:`mark_update`) default to no-ops for samplers
    that keep no per-position state.

    Examples:
        >>> import torch
        >>> from rl_replay.samplers import RandomSampler
        >>> sampler = RandomSampler()
        >>> sampler.ran_out
        False
        >>> sampler.state_dict()
        {}
    """

    # ``True`` once a data-consuming sampler has handed out every element of an epoch.
    ran_out: bool = False

    def __init__(self) -> None:
        self._storage: Any = None  # Any: any object following the Storage contract
        self._lock = threading.RLock()

    def __getstate__(self) -> dict[str, Any]:
        # locks do not pickle (spawned workers get a sampler copy with a fresh lock)
        state = self.__dict__.copy()
        state.pop("_lock", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()

    # ----------------------------------------------------------------- abstract
    @abc.abstractmethod
    def sample(self, storage: Any, batch_size: int) -> tuple[Any, dict[str, Any]]:
        """Draw ``batch_size`` indices from ``storage``.

        Returns:
            ``(index, info)``: ``index`` is a flat ``LongTensor`` for ``ndim=1``
            storages and a tuple of ``LongTensor`` (one per storage dim) otherwise;
            ``info`` maps names (or nested keys) to per-sample tensors.
        """
        raise NotImplementedError

    @abc.abstractmethod
    def _empty(self) -> None:
        """Forget every per-position state (the hook behind :meth:`empty`)."""
        raise NotImplementedError

    def empty(self) -> None:
        """Forget every per-position state (the storage was emptied)."""
        self._empty()

    # ----------------------------------------------------------------- hooks
    def attach_storage(
        self, storage: Any
    ) -> None:  # Any: any object following the Storage contract
        """Remember the storage the buffer writes into (called once by the buffer)."""
        self._storage = storage

    def _attach_storage(self, storage: Any) -> None:  # Any: see attach_storage
        """TorchRL's spelling of :meth:`attach_storage`."""
        self.attach_storage(storage)

    def add(self, index: int) -> None:
        """Tell the sampler that the cursor-dim position ``index`` was written."""
        self.extend(torch.as_tensor([index], dtype=torch.long))

    def extend(self, index: torch.Tensor) -> None:
        """Tell the sampler that the cursor-dim positions ``index`` were written."""
        return None

    def check_write(self, data: Any) -> None:  # Any: whatever the buffer is about to write
        """Raise if ``data`` cannot be written for this sampler (called before any write)."""
        return None

    def _check_write(self, data: Any) -> None:  # Any: see check_write
        """The underscore spelling of :meth:`check_write`."""
        self.check_write(data)

    def update_priority(
        self, index: Any, priority: float | torch.Tensor, *, storage: Any = None
    ) -> None:  # Any: an index in the storage's own form (tensor or tuple of tensors)
        """Update priorities at ``index`` (a no-op for non-prioritized samplers)."""
        return None

    def mark_update(self, index: Any, *, storage: Any = None) -> None:  # Any: see update_priority
        """Mark ``index`` as updated in place (a no-op for non-prioritized samplers)."""
        return None

    @property
    def default_priority(self) -> float:
        """The priority given to new elements (``1.0`` for non-prioritized samplers)."""
        return 1.0

    # ----------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        """Return the sampler state: tensors and JSON-able values, possibly nested."""
        return {}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore the state returned by :meth:`state_dict`."""
        return None

    def dumps(self, path: str | Path) -> None:
        """Save the sampler state under the directory ``path``.

        Tensors go to checksummed tensor files, everything else to JSON.
        """
        dump_state(self.state_dict(), Path(path), owner=type(self).__name__)

    def loads(self, path: str | Path) -> None:
        """Load a state saved by :meth:`dumps` from the directory ``path``.

        Raises:
            FileNotFoundError: if ``path`` or one of its files is missing.
            ValueError: if the checkpoint was written by another sampler class or is
                unreadable.
        """
        self.load_state_dict(load_state(Path(path), owner=type(self).__name__))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


# --------------------------------------------------------------------- helpers
def storage_ndim(storage: Any) -> int:
    """The number of storage batch dims (``1`` for objects without an ``ndim``)."""
    return int(getattr(storage, "ndim", 1))


def device_of(storage: Any) -> torch.device:
    """The device a storage keeps its data on (CPU when it does not say)."""
    device = getattr(storage, "device", None)
    if isinstance(device, torch.device):
        return device
    if device is None or device == "auto":
        return torch.device("cpu")
    return torch.device(device)


def unravel(flat: torch.Tensor, storage: Any) -> Any:
    """Flat row-major positions -> the storage's index form (tensor or tuple)."""
    if storage_ndim(storage) == 1:
        return flat
    return torch.unravel_index(flat, tuple(storage.shape))


def ravel(index: Any, storage: Any) -> torch.Tensor:
    """The storage's index form -> flat row-major positions (a ``LongTensor``)."""
    if isinstance(index, (tuple, list)) and len(index) and isinstance(index[0], torch.Tensor):
        if len(index) == 1:
            return index[0].reshape(-1).long()
        shape = tuple(storage.shape)
        flat = torch.zeros_like(index[0], dtype=torch.long)
        for dim, idx in zip(shape, index):
            flat = flat * dim + idx.long()
        return flat.reshape(-1)
    return torch.as_tensor(index, dtype=torch.long).reshape(-1)


def rows_of(index: Any, rows: int) -> torch.Tensor:
    """The cursor-dim rows an in-place write touched (int, slice, tensor or tuple index)."""
    if isinstance(index, tuple):
        index = index[0]
    if isinstance(index, slice):
        return torch.arange(rows)[index]
    return torch.as_tensor(index, dtype=torch.long).reshape(-1).unique()


def check_replacement(replacement: Any, owner: str, *, variant: str | None) -> None:
    """Validate the ``replacement`` flag of a sampler constructor.

    Raises:
        TypeError: if it is not a bool, or ``False`` for a sampler without a
            without-replacement variant (``variant`` is ``None``).
    """
    if not isinstance(replacement, bool):
        raise TypeError(f"{owner} expected replacement to be a bool, got {replacement!r}.")
    if not replacement and variant is None:
        raise TypeError(
            f"{owner} has no without-replacement variant: got replacement=False. Drop the "
            "argument, or use SamplerWithoutReplacement / SliceSamplerWithoutReplacement."
        )


def check_batch_size(batch_size: Any, owner: str) -> int:
    """Validate a sample batch size."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
        raise ValueError(
            f"{owner}.sample expected batch_size to be a positive int, got {batch_size!r}. "
            "Pass batch_size to the buffer constructor or to sample()."
        )
    return batch_size


def check_not_empty(numel: int, owner: str) -> None:
    """Raise when there is nothing to sample from."""
    if numel == 0:
        raise RuntimeError(
            f"{owner} cannot sample from an empty storage: expected at least one stored "
            "element, found 0. Extend the buffer before sampling."
        )
