"""The :class:`Storage` base class: the container a replay buffer writes into.

The contract shared by buffers, writers and samplers:

* ``max_size`` is the capacity counted in elements over all storage batch dims.
* ``ndim`` is the number of leading dims of the data the storage indexes.  With
  ``ndim=2`` and data of shape ``[T, B, ...]`` (a buffer transposes ``[B, T]``
  data so that the time dim comes first, see ``dim_extend``), the storage shape
  is ``[ceil(max_size / B), B]``: dim 0 is the cursor (time) dim and
  ``max_size`` is rounded up to ``shape.numel()``.
* ``len(storage)`` counts valid elements over all storage dims (flattened);
  ``storage.len_along_dim0`` counts valid rows of the cursor dim.
* ``storage[index]`` / :meth:`Storage.get` accept an int, a slice, a flat
  ``LongTensor`` (``ndim=1``) or a tuple of ``LongTensor`` (``ndim>1``, as
  :func:`torch.unravel_index` produces over ``storage.shape``).
* :meth:`Storage.set` writes at an index and, when ``set_cursor=True`` (the
  writer path), grows the length.  Writers pass dim-0 positions (a slice for a
  contiguous block), return the dim-0 rows written, and the buffer hands those
  rows to ``sampler.extend`` (each row covers every element along the other dims).
* Tensor storages (``TensorStorage`` and subclasses) keep their data as a
  ``TensorDict`` (pytrees and plain tensors are converted internally and back on
  read) and expose ``storage._get_entry(key, index=None)``: the stored tensor for
  ``key`` (the full storage tensor when ``index`` is None) without building a
  TensorDict.  ``storage._rand_given_ndim(n)`` draws uniform valid indices.
* Objects registered with :meth:`Storage.attach` (samplers, writers) are told
  about :meth:`Storage._empty` through their own ``_empty()``.
"""

from __future__ import annotations

import abc
from pathlib import Path
from typing import Any

import torch

from rl_replay.storages._generations import generations_on

__all__ = ["Storage"]


class Storage(abc.ABC):
    """A Storage is the container of a replay buffer.

    Subclasses hold the data and implement :meth:`get`, :meth:`set`,
    :meth:`__len__`, :meth:`state_dict`, :meth:`load_state_dict` and
    :meth:`_empty`.  Serialisation to disk is delegated to a
    :class:`~rl_replay.StorageCheckpointerBase`.

    Args:
        max_size (int): the maximum number of elements the storage can hold.
        checkpointer (StorageCheckpointerBase, optional): the object that
            implements :meth:`dumps` / :meth:`loads`. Defaults to ``None``
            (the subclass default).
        compilable (bool, optional): accepted for API compatibility; this
            implementation does not rely on ``torch.compile``. Defaults to ``False``.

    Raises:
        ValueError: if ``max_size`` is not a positive integer.
    """

    ndim: int = 1
    _default_checkpointer: type | None = None

    def __init__(self, max_size: int, checkpointer: Any = None, compilable: bool = False) -> None:
        # checkpointer is Any: a StorageCheckpointerBase, typed loosely to avoid an import cycle.
        _check_max_size(max_size)
        self.max_size = int(max_size)
        self._attached_entities: list[Any] = []
        self._compilable = compilable
        if checkpointer is None and self._default_checkpointer is not None:
            checkpointer = self._default_checkpointer()
        self.checkpointer = checkpointer

    # ----------------------------------------------------------------- abstract
    @abc.abstractmethod
    def get(self, index: Any) -> Any:  # Any: storages hold arbitrary data
        """Return the data stored at ``index``."""
        raise NotImplementedError

    @abc.abstractmethod
    def set(self, cursor: Any, data: Any, *, set_cursor: bool = True) -> None:  # Any: see get
        """Write ``data`` at ``cursor``; grow the length when ``set_cursor`` is ``True``."""
        raise NotImplementedError

    @abc.abstractmethod
    def __len__(self) -> int:
        """Number of valid elements, counted over all storage dims."""
        raise NotImplementedError

    @abc.abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """Return the storage content and metadata as a (torch.save-able) dict."""
        raise NotImplementedError

    @abc.abstractmethod
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the storage from the output of :meth:`state_dict`."""
        raise NotImplementedError

    @abc.abstractmethod
    def _empty(self) -> None:
        """Forget all stored elements (keep the capacity)."""
        raise NotImplementedError

    # ----------------------------------------------------------------- shared
    @property
    def shape(self) -> torch.Size:
        """The storage batch shape (valid once the storage is initialised)."""
        return torch.Size([self.max_size])

    @property
    def _len_along_dim0(self) -> int:
        """Number of valid rows along the cursor (first) dim (the hook subclasses override)."""
        return len(self)

    @property
    def len_along_dim0(self) -> int:
        """Number of valid rows along the cursor (first) dim (``len(self)`` when ``ndim == 1``)."""
        return self._len_along_dim0

    def __getitem__(self, index: Any) -> Any:  # Any: see get
        return self.get(index)

    def __setitem__(self, index: Any, value: Any) -> None:
        self.set(index, value, set_cursor=False)

    def attach(self, buffer: Any) -> None:  # Any: any object with an ``_empty`` method
        """Register an object (sampler, writer, buffer) to be told when the storage is emptied."""
        if buffer not in self._attached_entities:
            self._attached_entities.append(buffer)

    def empty(self) -> None:
        """Empty the storage and every attached entity.

        Written slots' generations advance (see ``RoundRobinWriter(track_generations=True)``).
        """
        self._empty()
        counters = generations_on(self)
        if counters is not None:
            counters.advance_written()
        for entity in self._attached_entities:
            entity._empty()

    def dumps(self, path: str | Path) -> None:
        """Save the storage under the directory ``path`` through its checkpointer.

        Raises:
            RuntimeError: if the storage has no checkpointer.
        """
        self._require_checkpointer("dumps").dumps(self, Path(path))

    def loads(self, path: str | Path) -> None:
        """Load the storage from the directory ``path`` through its checkpointer.

        Raises:
            RuntimeError: if the storage has no checkpointer.
        """
        self._require_checkpointer("loads").loads(self, Path(path))

    def _stage_loads(self, path: str | Path) -> Any:  # Any: a function of no argument
        """Read and check the checkpoint at ``path``; return the step that loads it.

        Raises:
            RuntimeError: if the storage has no checkpointer.
        """
        return self._require_checkpointer("loads")._stage(self, Path(path))

    def _require_checkpointer(self, method: str) -> Any:
        if self.checkpointer is None:
            raise RuntimeError(
                f"{type(self).__name__}.{method} needs a checkpointer, got None. "
                "Set storage.checkpointer to a StorageCheckpointerBase instance."
            )
        return self.checkpointer

    def _rand_given_ndim(self, batch_size: int, generator: torch.Generator | None = None) -> Any:
        """Uniform random valid indices, in the storage's index form.

        Returns a flat ``LongTensor`` when ``ndim == 1``, else a tuple of
        ``LongTensor`` (one per storage dim).

        Raises:
            RuntimeError: if the storage is empty.
        """
        numel = len(self)
        if numel == 0:
            raise RuntimeError(
                f"Cannot sample from an empty {type(self).__name__}: expected at least one "
                "stored element, found 0. Extend the buffer before sampling."
            )
        flat = torch.randint(numel, (batch_size,), generator=generator)
        if self.ndim == 1:
            return flat
        return torch.unravel_index(flat, (self._len_along_dim0, *self.shape[1:]))

    def __getstate__(self) -> dict[str, Any]:
        # Attached entities (samplers with thread locks) do not travel with the storage:
        # the owner (a buffer) attaches its components again after unpickling.
        state = self.__dict__.copy()
        state["_attached_entities"] = []
        return state

    def __repr__(self) -> str:
        return f"{type(self).__name__}(max_size={self.max_size}, len={len(self)})"


def _check_max_size(max_size: Any) -> None:
    if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size <= 0:
        raise ValueError(
            f"Storage expected max_size to be a positive int, got {max_size!r}. "
            "Pass the capacity as an int, e.g. LazyTensorStorage(1000)."
        )
