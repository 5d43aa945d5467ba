"""The :class:`Writer` base class: decides where a buffer writes new data."""

from __future__ import annotations

import abc
from pathlib import Path
from typing import Any

import torch
from tensordict import is_tensor_collection

from rl_replay import _td
from rl_replay.samplers.base import dump_state, load_state
from rl_replay.storages._generations import generations_on
from rl_replay.storages.base import Storage

__all__ = ["Writer"]


class Writer(abc.ABC):
    """A ReplayBuffer base Writer class.

    A writer owns the write cursor: :meth:`add` writes one element,
    :meth:`extend` a batch along the leading dim, both into the storage given
    to :meth:`register_storage`, and return the positions written along the
    storage's cursor (first) dim: an int for :meth:`add`, a ``LongTensor`` for
    :meth:`extend`.  With ``ndim > 1`` storages each position is a whole row.
    A buffer calls :meth:`register_storage`, :meth:`add`, :meth:`extend`,
    :meth:`empty`, :meth:`state_dict` / :meth:`load_state_dict` and
    :meth:`dumps` / :meth:`loads`; subclasses implement :meth:`add`, :meth:`extend`
    and the ``_empty`` hook behind :meth:`empty` (TorchRL's extension point).

    Args:
        compilable (bool, optional): accepted for API compatibility. Defaults to ``False``.
    """

    def __init__(self, compilable: bool = False) -> None:
        self._storage: Storage | None = None
        self._compilable = compilable

    def register_storage(self, storage: Storage) -> None:
        """Bind the writer to ``storage``."""
        self._storage = storage

    @property
    def tracks_generations(self) -> bool:
        """Whether :meth:`generations_of` reports slot generations (``-1`` everywhere if not)."""
        return bool(getattr(self, "_track_generations", False))

    def generations_of(self, index: Any) -> torch.Tensor:  # Any: an index as extend returns
        """The generation of the storage slots at ``index``.

        A slot's generation counts the writes it received (``0`` after the first)
        and advances when the storage is emptied; comparing the generation taken
        with an index to the current one tells whether the slot still holds the
        same record.  ``-1`` means "no usable stamp": a never-written slot, an
        out-of-range index, or a writer built without generation tracking.

        A tensor is read as a batch of cursor-dim slots; a ``[N, ndim]`` tensor
        as ``N`` coordinates and a tuple of per-dim indices as coordinates (their
        first entry is the slot).

        Examples:
            >>> import torch
            >>> from rl_replay import ReplayBuffer, LazyTensorStorage, RoundRobinWriter
            >>> rb = ReplayBuffer(storage=LazyTensorStorage(3),
            ...                   writer=RoundRobinWriter(track_generations=True))
            >>> index = rb.extend(torch.arange(4))  # slot 0 is written twice
            >>> rb.writer.generations_of(torch.arange(3))
            tensor([1, 0, 0])
        """
        slots = _slots_of(index, getattr(self._storage, "ndim", 1))
        counters = generations_on(self._storage) if self.tracks_generations else None
        if counters is None:
            return torch.full(slots.shape, -1, dtype=torch.int64)
        return counters.of(slots)

    @abc.abstractmethod
    def add(self, data: Any) -> Any:  # Any: any data the storage accepts
        """Write one element; return its position."""
        raise NotImplementedError

    @abc.abstractmethod
    def extend(self, data: Any) -> Any:  # Any: see add
        """Write a batch of elements; return their positions."""
        raise NotImplementedError

    @abc.abstractmethod
    def _empty(self) -> None:
        """Reset the write state (the hook behind :meth:`empty`)."""
        raise NotImplementedError

    def empty(self) -> None:
        """Reset the write state (the storage was emptied)."""
        self._empty()

    def state_dict(self) -> dict[str, Any]:
        """Return the writer state (tensors and JSON-able values)."""
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the output of :meth:`state_dict`."""
        return None

    def dumps(self, path: str | Path) -> None:
        """Save the writer state in the directory ``path`` (JSON + checksummed tensor files)."""
        dump_state(self.state_dict(), Path(path), owner=type(self).__name__)

    def loads(self, path: str | Path) -> None:
        """Load a state saved by :meth:`dumps` from the directory ``path``.

        Raises:
            FileNotFoundError: if a file of the checkpoint is missing.
            ValueError: if the checkpoint is unreadable or written by another class.
        """
        self.load_state_dict(load_state(Path(path), owner=type(self).__name__))

    def _require_storage(self) -> Storage:
        if self._storage is None:
            raise RuntimeError(
                f"{type(self).__name__} has no storage: expected register_storage(storage) to be "
                "called first, found none. Build it through a ReplayBuffer."
            )
        return self._storage

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _slots_of(index: Any, ndim: int) -> torch.Tensor:
    """The cursor-dim slots addressed by ``index`` (int, tensor, coordinates or tuple)."""
    if isinstance(index, tuple):
        index = index[0]
    slots = torch.as_tensor(index, dtype=torch.int64)
    if ndim > 1 and slots.ndim == 2 and slots.shape[-1] == ndim:
        slots = slots[:, 0]
    return slots


def _batch_len(data: Any) -> int:
    """Length of ``data`` along its leading dim (tensor, tensordict, list or pytree).

    Raises:
        ValueError: if ``data`` has no leading dim.
    """
    if is_tensor_collection(data):
        shape = data.batch_size
    elif isinstance(data, torch.Tensor):
        shape = data.shape
    elif isinstance(data, list):
        return len(data)
    else:
        leaves = _td.tree_leaves(data)
        if not leaves or not isinstance(leaves[0], torch.Tensor):
            raise ValueError(
                f"Cannot extend with {type(data).__name__}: expected a tensor, a tensordict, a list "
                "or a pytree of tensors with a leading batch dim."
            )
        shape = leaves[0].shape
    if len(shape) == 0:
        raise ValueError(
            "extend expected data with a leading batch dim, found a scalar batch shape (). "
            "Use add() for a single element or unsqueeze the data."
        )
    return shape[0]


def _take_last(data: Any, count: int) -> Any:
    """Keep the last ``count`` elements of ``data`` along its leading dim."""
    if isinstance(data, list) or is_tensor_collection(data) or isinstance(data, torch.Tensor):
        return data[-count:]
    return _td.tree_map(lambda leaf: leaf[-count:], data)
