"""The generic, composable :class:`ReplayBuffer`.

A buffer glues a storage (where data lives), a writer (where new data goes) and
a sampler (which positions are read): instances of the abstract bases
:class:`~rl_replay.Storage`, :class:`~rl_replay.Writer` and :class:`~rl_replay.Sampler`,
of which it calls only public methods.  Writes are ``transform.inv -> writer ->
storage -> sampler.extend`` and reads ``sampler.sample -> storage.get ->
collate_fn -> transform``, both under one lock so that threads may extend and
sample concurrently.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch
from tensordict import unravel_key

from rl_replay._buffer_helpers import (
    _check_arguments,
    _check_in_range,
    _default_collate,
    _identity,
    _made_a_batch,
    _sample_with_generator,
    _stack_items,
    _transpose,
)
from rl_replay._checkpoint import dump_buffer, load_buffer, load_buffer_state
from rl_replay._conditional import ConditionalUpdateResult, update_if_present
from rl_replay._consume import consuming_sampler, write_consumed_slots
from rl_replay._pickling import buffer_state, restore_buffer
from rl_replay._prefetch import prefetch_state, restore_prefetch, sample_prefetched
from rl_replay._transforms import _TransformList
from rl_replay.checkpointers.base import StorageCheckpointerBase
from rl_replay.samplers import RandomSampler
from rl_replay.samplers.base import Sampler
from rl_replay.storages import ListStorage
from rl_replay.storages.base import Storage
from rl_replay.writers import RoundRobinWriter
from rl_replay.writers.base import Writer

__all__ = ["ReplayBuffer"]


class ReplayBuffer:
    """A generic, composable replay buffer class.

    Args:
        storage (Storage, optional): where the data lives. Defaults to
            ``ListStorage(max_size=1000)``.
        sampler (Sampler, optional): which positions are read. Defaults to
            :class:`~rl_replay.RandomSampler`.
        writer (Writer, optional): where new data is written. Defaults to
            :class:`~rl_replay.RoundRobinWriter`.
        collate_fn (callable, optional): merges the data read from the storage
            into a batch. Defaults to stacking for :class:`~rl_replay.ListStorage`
            and to the identity for tensor storages.
        pin_memory (bool, optional): pin sampled data (only when CUDA is available).
            Defaults to ``False``.
        prefetch (int, optional): number of batches sampled ahead in background
            threads; ``0`` or ``None`` means no prefetching. Defaults to ``None``.
        transform (callable, optional): applied to sampled data; its ``inv``, if
            any, is applied to written data. Defaults to ``None``.
        batch_size (int, optional): the default batch size of :meth:`sample`.
            Defaults to ``None`` (must then be passed to :meth:`sample`).
        dim_extend (int, optional): the dim of written data along which
            :meth:`extend` writes. Defaults to ``storage.ndim - 1`` (the last
            storage dim of the data, i.e. time).
        checkpointer (StorageCheckpointerBase, optional): replaces the storage's
            checkpointer. Defaults to ``None`` (keep the storage's).
        generator (torch.Generator, optional): the random generator used for
            sampling. Defaults to ``None`` (torch's global generator).
        shared (bool, optional): the buffer is used by several processes. Lengths
            and cursors always live in shared memory; with ``True``, transforms that
            need shared write state are shared when added (see
            ``rl_replay._transforms``) or refused with a ``RuntimeError``.
            Defaults to ``False``.
        compilable (bool, optional): accepted for API compatibility. Defaults to ``None``.
        delayed_init (bool, optional): accepted for API compatibility: lazy
            storages always allocate on the first write. Defaults to ``False``.
        consume_after_n_samples (int, optional): an element leaves the buffer
            after being sampled this many times: ``len(rb)`` counts the elements
            left, a batch holds distinct elements (fewer when fewer are left) and
            new writes fill consumed slots before the writer's cursor moves.
            Needs the default sampler, a 1-dim storage and no prefetching.
            Defaults to ``None`` (elements are never consumed).

    Raises:
        ValueError: for a non-positive ``batch_size``, a negative ``prefetch``, ``prefetch``
            with ``shared=True``, a bad
            ``dim_extend``, or no ``batch_size`` with a ``drop_last=True`` sampler (its
            batches must have a known size).

    Examples:
        >>> from rl_replay import ReplayBuffer, ListStorage
        >>> rb = ReplayBuffer(storage=ListStorage(10))
        >>> rb.add("a string!") # first element will be a string
        0
        >>> rb.extend([30, None])  # element [1] is an int, [2] is None
        tensor([1, 2])
        >>> len(rb), rb[1]
        (3, 30)

        Storing trajectories: a single environment's steps are stored one after
        the other (here 11 batches of 10 steps from an environment whose
        episodes last 42 steps, into 100 slots):

        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rl_replay import LazyTensorStorage, SliceSampler
        >>> def collect(start, frames, num_envs=None):
        ...     step = torch.arange(start, start + frames) % 42 + 1
        ...     traj = torch.arange(start, start + frames) // 42
        ...     if num_envs is not None:  # a batch of environments: [num_envs, frames]
        ...         step, traj = step.expand(num_envs, frames), traj.expand(num_envs, frames) * num_envs
        ...         traj = traj + torch.arange(num_envs).unsqueeze(-1)
        ...     batch = step.shape
        ...     return TensorDict({("collector", "traj_ids"): traj, ("next", "step_count"): step.unsqueeze(-1),
        ...                        ("next", "done"): (step == 42).unsqueeze(-1)}, batch)
        >>> rb = ReplayBuffer(
        ...     storage=LazyTensorStorage(100),
        ...     sampler=SliceSampler(num_slices=8, traj_key=("collector", "traj_ids"),
        ...         truncated_key=None, strict_length=False),
        ...     batch_size=64)
        >>> for i in range(11):
        ...     _ = rb.extend(collect(10 * i, 10))
        >>> assert len(rb) == 100, len(rb)
        >>> rb[:]["next", "step_count"][:12].squeeze(-1).tolist()
        [17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 11, 12]
        >>> rb.sample()["next", "step_count"].shape
        torch.Size([64, 1])

        With several environments, ``ndim=2`` keeps each environment's
        trajectory contiguous: the storage dims are ``[time, env]``:

        >>> rb = ReplayBuffer(
        ...     storage=LazyTensorStorage(100, ndim=2),
        ...     sampler=SliceSampler(num_slices=8, traj_key=("collector", "traj_ids"),
        ...         truncated_key=None, strict_length=False),
        ...     batch_size=64)
        >>> for i in range(101):
        ...     _ = rb.extend(collect(i, 1, num_envs=2))
        >>> assert len(rb) == 100, len(rb)
        >>> rb[:]["next", "step_count"].squeeze(-1)[:3].tolist()
        [[17, 17], [10, 10], [11, 11]]
    """

    def __init__(
        self,
        *,
        storage: Storage | None = None,
        sampler: Sampler | None = None,
        writer: Writer | None = None,
        collate_fn: Callable[[Any], Any] | None = None,
        pin_memory: bool = False,
        prefetch: int | None = None,
        transform: Callable[[Any], Any] | None = None,
        batch_size: int | None = None,
        dim_extend: int | None = None,
        checkpointer: StorageCheckpointerBase | None = None,
        generator: torch.Generator | None = None,
        shared: bool = False,
        compilable: bool | None = None,
        delayed_init: bool = False,
        consume_after_n_samples: int | None = None,
    ) -> None:
        self._storage: Storage = storage if storage is not None else ListStorage(max_size=1_000)
        sampler = consuming_sampler(consume_after_n_samples, sampler, self._storage, prefetch)
        self._sampler: Sampler = sampler if sampler is not None else RandomSampler()
        self._consuming = consume_after_n_samples is not None
        self._writer: Writer = writer if writer is not None else self._default_writer()
        if checkpointer is not None:
            self._storage.checkpointer = checkpointer
        self._writer.register_storage(self._storage)
        self._sampler.attach_storage(self._storage)
        self._storage.attach(self._writer)
        self._storage.attach(self._sampler)
        self._collate_fn = collate_fn if collate_fn is not None else _default_collate(self._storage)
        self._pin_memory = pin_memory and torch.cuda.is_available()
        self._transform = _TransformList()
        if transform is not None:
            self._transform.append(transform, shared=shared)
        self._batch_size, self._prefetch, self.dim_extend = _check_arguments(
            self._sampler, self._storage, batch_size, prefetch, shared, dim_extend
        )
        self._generator = generator
        self._shared = shared
        self._lock = threading.RLock()
        self._executor: ThreadPoolExecutor | None = None
        self._futures: deque[tuple[int, Future]] = deque()

    def _default_writer(self) -> Writer:
        return RoundRobinWriter()

    # ------------------------------------------------------------ components
    @property
    def storage(self) -> Storage:
        """The storage of the buffer."""
        return self._storage

    @property
    def sampler(self) -> Sampler:
        """The sampler of the buffer."""
        return self._sampler

    @property
    def writer(self) -> Writer:
        """The writer of the buffer."""
        return self._writer

    @property
    def batch_size(self) -> int | None:
        """The default batch size of :meth:`sample`."""
        return self._batch_size

    @property
    def transform(self) -> _TransformList:
        """The transforms applied on read (and inverted on write)."""
        return self._transform

    def __len__(self) -> int:
        if self._consuming:
            return self._sampler.live_count(self._storage)
        return len(self._storage)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(storage={self._storage!r}, sampler={self._sampler!r}, "
            f"writer={self._writer!r}, batch_size={self._batch_size})"
        )

    # ------------------------------------------------------------ writes
    def add(self, data: Any) -> int:  # Any: one element of whatever the storage holds
        """Write one element; return its position along the storage's cursor dim.

        An inverse transform may make a batch of the element (``MultiStepTransform``
        holds steps back until ``n_steps`` later ones arrived): the batch is written as
        :meth:`extend` writes; its last position is returned (``None`` if empty).

        Raises:
            KeyError, ValueError: if ``data`` does not match what the storage holds
                (nothing is written then).
        """
        if self._transform.has_inv:
            element, data = data, self._transform.inv(data)
            if _made_a_batch(element, data):  # written as extend writes its data
                index = self._write_batch(data)
                return int(index[-1]) if len(index) else None
        with self._lock:
            self._sampler.check_write(data)
            if self._consuming:
                reused, data = write_consumed_slots(self._sampler, self._storage, data, True)
                if reused is not None:
                    self._sampler.extend(reused)
                    return int(reused[0])
            index = self._writer.add(data)
            if index is not None:
                self._sampler.add(index)
        return index

    def extend(
        self, data: Any, *, update_priority: bool | None = None
    ) -> torch.Tensor:  # Any: a batch of elements
        """Write a batch of elements; return their positions along the storage's cursor dim.

        Tensors, tensordicts and tuples/dicts (pytrees) are split along their
        leading dim (``dim_extend`` for multi-dim storages); a list is a
        sequence of separate elements. ``update_priority`` is used by the
        tensordict buffers, which read priorities from the written data; here
        written elements always get the sampler's default priority.

        Raises:
            KeyError, ValueError: if ``data`` does not match what the storage holds
                (nothing is written then).
        """
        if self._transform.has_inv:
            data = self._transform.inv(data)
        return self._write_batch(data)

    def _write_batch(self, data: Any) -> torch.Tensor:  # Any: a batch, transforms applied
        if data is None:
            return torch.zeros((0,), dtype=torch.long)
        if isinstance(data, list) and not isinstance(self._storage, ListStorage):
            data = _stack_items(data)
        if self.dim_extend > 0:
            data = _transpose(data, self.dim_extend)
        with self._lock:
            self._sampler.check_write(data)
            reused = None
            if self._consuming:
                reused, data = write_consumed_slots(self._sampler, self._storage, data, False)
                if data is None:
                    self._sampler.extend(reused)
                    return reused
            index = self._writer.extend(data)
            if reused is not None:
                index = torch.cat([reused, index])
            self._sampler.extend(index)
        return index

    def __setitem__(self, index: Any, value: Any) -> None:
        """Write ``value`` at ``index`` without moving the cursor or changing the length.

        The value goes through the transforms' ``inv`` first, as :meth:`extend` data does.
        """
        if self._transform.has_inv:
            value = self._transform.inv(value)
        with self._lock:
            self._storage.set(index, value, set_cursor=False)
            self._sampler.mark_update(index, storage=self._storage)

    def update_priority(
        self, index: Any, priority: Any
    ) -> None:  # Any: index form / float or tensor
        """Forward new priorities to the sampler (a no-op for non-prioritized samplers)."""
        with self._lock:
            self._sampler.update_priority(index, priority, storage=self._storage)

    def update_if_present(
        self,
        *,
        index: Any,  # Any: a tensor or the tuple extend returns
        generation: Any,  # Any: a tensor of generations
        patch: Any,  # Any: a mapping of keys to tensors, or a tensordict
        version_key: Any = None,  # Any: a (nested) key
        version: int | torch.Tensor | None = None,
        require_newer: bool = False,
    ) -> ConditionalUpdateResult:
        """Patch the stored records whose ``(index, generation)`` handle is still live.

        Slots are recycled by the writer, so an index taken at sampling time may
        name another record when an asynchronous computation writes back.  Only
        records whose slot still has ``generation`` (see
        :meth:`~rl_replay.Writer.generations_of`) get ``patch``; the others are
        left untouched.  The whole patch is checked (keys, shapes, dtypes) before
        anything is written.  A patch does not change a record's generation.

        With ``version_key`` and ``version``, a live record is only patched when
        ``version`` beats the value stored under ``version_key`` (``>`` with
        ``require_newer=True``, ``>=`` otherwise); the accepted version is
        written there with the patch.  When one slot is addressed several times,
        only the row with the highest version (the last on ties) is applied.

        Args:
            index (torch.Tensor): storage positions, as :meth:`extend` returns or
                a sample's ``"index"``.
            generation (torch.Tensor): the generations taken with ``index`` (a
                sample's ``"index_generation"``).
            patch (mapping or TensorDictBase): stored keys (nested keys as tuples)
                to tensors with one row per index.
            version_key (NestedKey, optional): a stored scalar-per-record entry
                holding each record's version. Defaults to ``None``.
            version (int or torch.Tensor, optional): the incoming version, one
                for all or one per index; needs ``version_key``. Defaults to ``None``.
            require_newer (bool, optional): ties lose. Defaults to ``False``.

        Returns:
            A :class:`~rl_replay.ConditionalUpdateResult`.

        Raises:
            RuntimeError: if the storage is not a tensor storage or the writer
                does not track generations (no conditional updates possible).
            KeyError: if a patch key or ``version_key`` is not stored.
            ValueError: for a patch entry of the wrong shape or dtype, only one of
                ``version_key``/``version``, ``version_key`` in ``patch``, a dotted
                or non-scalar ``version_key``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> from rl_replay import (LazyTensorStorage, TensorDictReplayBuffer,
            ...     TensorDictRoundRobinWriter)
            >>> rb = TensorDictReplayBuffer(storage=LazyTensorStorage(4),
            ...     writer=TensorDictRoundRobinWriter(track_generations=True))
            >>> index = rb.extend(TensorDict({"x": torch.zeros(4)}, [4]))
            >>> generation = rb.writer.generations_of(index)
            >>> _ = rb.extend(TensorDict({"x": torch.ones(1)}, [1]))  # slot 0 is recycled
            >>> result = rb.update_if_present(index=index, generation=generation,
            ...     patch={"x": torch.full((4,), 5.0)})
            >>> result.updated.tolist(), result.stale_count
            ([False, True, True, True], 1)
            >>> rb[:]["x"].tolist()
            [1.0, 5.0, 5.0, 5.0]
        """
        return update_if_present(
            self, index, generation, patch, version_key, version, require_newer
        )

    def empty(self) -> None:
        """Remove every element (the capacity is kept) and reset the writer and sampler."""
        with self._lock:
            self._storage.empty()  # tells the attached writer and sampler
            self._futures.clear()

    def _empty(self) -> None:
        self.empty()

    # ------------------------------------------------------------ reads
    def __getitem__(self, index: Any) -> Any:  # Any: int, slice, tensor, key
        """Read stored elements (no sampling); a key reads that entry of every valid element.

        Raises:
            IndexError: if an index points past the written elements (``len <= k``),
                even when it is below the capacity.
        """
        if isinstance(index, str) or (
            isinstance(index, tuple) and index and isinstance(index[0], str)
        ):
            return self[:][unravel_key(index)]
        rows = self._storage._len_along_dim0
        if isinstance(index, slice):
            index = slice(*index.indices(rows))
        else:
            index = _check_in_range(index, rows, type(self).__name__)
        with self._lock:
            data = self._storage.get(index)
        if not isinstance(index, int):
            data = self._collate_fn(data)
        if len(self._transform):
            data = self._transform(data)
        return data

    def sample(
        self, batch_size: int | None = None, return_info: bool = False, include_info: Any = None
    ) -> Any:  # Any: include_info is accepted and ignored (see below)
        """Sample a batch.

        Args:
            batch_size (int, optional): the number of elements. Defaults to the
                constructor's ``batch_size``.
            return_info (bool, optional): also return the sampler's info dict (with
                the sampled ``"index"``). Defaults to ``False``.
            include_info (bool, optional): TorchRL's deprecated flag; tensordict
                buffers always write the info into the sample. Defaults to ``None``.

        Raises:
            ValueError: if no batch size is given here nor at construction.
            RuntimeError: if the buffer is empty.
        """
        if batch_size is None:
            batch_size = self._batch_size
            if batch_size is None:
                raise ValueError(
                    f"{type(self).__name__}.sample expected a batch_size, got None here and at "
                    "construction. Pass sample(batch_size) or ReplayBuffer(batch_size=...)."
                )
        elif self._batch_size is not None and batch_size != self._batch_size and self._prefetch:
            raise ValueError(
                f"A prefetching buffer samples batches of {self._batch_size}, got batch_size="
                f"{batch_size}. Drop the argument or build the buffer without prefetch."
            )
        if self._prefetch:
            data, info = sample_prefetched(self, batch_size)
        else:
            data, info = self._sample(batch_size)
        return (data, info) if return_info else data

    def _sample(self, batch_size: int) -> tuple[Any, dict[str, Any]]:
        with self._lock:
            if self._generator is None:
                index, info = self._sampler.sample(self._storage, batch_size)
            else:
                index, info = self._sample_with_generator(batch_size)
            info["index"] = index
            if self._writer.tracks_generations:
                info["index_generation"] = self._writer.generations_of(index)
            data = self._storage.get(index)
        return self._finish(data), info

    def _read(self, index: Any) -> Any:  # Any: an index in the storage's form
        """Read ``index`` and process it like a sample (collate, pin, transform)."""
        with self._lock:
            data = self._storage.get(index)
        return self._finish(data)

    def _finish(self, data: Any) -> Any:  # Any: what the storage returned
        if self._collate_fn is _identity and not self._pin_memory and not len(self._transform):
            return data  # tensor storages without transforms: nothing to do
        data = self._collate_fn(data)
        if self._pin_memory:
            data = data.pin_memory()
        if len(self._transform):
            data = self._transform(data)
        return data

    def _sample_with_generator(self, batch_size: int) -> tuple[Any, dict[str, Any]]:
        return _sample_with_generator(self._sampler, self._storage, self._generator, batch_size)

    def __iter__(self) -> Iterator[Any]:
        """Sample batches until the sampler runs out (forever for samplers that never do).

        Raises:
            RuntimeError: if the buffer has no default ``batch_size``.
        """
        if self._batch_size is None:
            raise RuntimeError(
                f"Iterating over a {type(self).__name__} needs a batch_size at construction, got "
                "None. Build it with batch_size=... or call sample(batch_size) in a loop."
            )
        self._sampler.ran_out = False
        while not self._sampler.ran_out:
            yield self.sample()

    # ------------------------------------------------------------ transforms
    def append_transform(
        self, transform: Callable[[Any], Any], *, invert: bool = False
    ) -> ReplayBuffer:
        """Add a transform at the end of the list (``invert`` swaps its forward and ``inv``)."""
        self._transform.append(transform, invert, shared=self._shared)
        return self

    def insert_transform(
        self, index: int, transform: Callable[[Any], Any], *, invert: bool = False
    ) -> ReplayBuffer:
        """Insert a transform at position ``index`` (``invert`` swaps its forward and ``inv``)."""
        self._transform.insert(index, transform, invert, shared=self._shared)
        return self

    # ------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """The state of the storage, sampler and writer (transforms are not saved)."""
        pending = prefetch_state(self)  # waits for batches in flight: outside the lock
        with self._lock:
            return {
                "_storage": self._storage.state_dict(),
                "_sampler": self._sampler.state_dict(),
                "_writer": self._writer.state_dict(),
                "_batch_size": self._batch_size,
                **pending,
            }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the output of :meth:`state_dict`; on error the buffer is unchanged.

        Raises:
            KeyError: if an entry is missing.
            ValueError: if a component's state does not fit it.
        """
        for _, future in list(self._futures):
            future.result()  # batches in flight finish (outside the lock) before being dropped
        with self._lock:
            load_buffer_state(self, state_dict)
            restore_prefetch(self, state_dict)

    def dumps(self, path: str | Path) -> None:
        """Save the storage, sampler and writer under the directory ``path``, atomically.

        Each dump is written to a new snapshot directory inside ``path`` and
        committed by atomically replacing the pointer file ``path/CURRENT``: a
        crash at any point leaves either the previous or the new checkpoint.
        Temporaries of killed dumps are removed.  The files hold no pickle, and
        each carries a checksum.

        Raises:
            TypeError: if the storage holds something that cannot be saved without pickle.
        """
        with self._lock:
            dump_buffer(self, Path(path))

    def loads(self, path: str | Path) -> None:
        """Load a checkpoint written by :meth:`dumps`.

        Every file is read and checked (checksums, sizes, metadata against the
        data and this buffer) before anything changes: on error the buffer is
        left as it was.  Loading never unpickles.

        Raises:
            FileNotFoundError: if ``path``, its pointer file or a component file is missing.
            ValueError: if a file is corrupt or the checkpoint does not fit this buffer.
        """
        with self._lock:
            load_buffer(self, Path(path))
            self._futures.clear()

    def __getstate__(self) -> dict[str, Any]:
        return buffer_state(self)

    def __setstate__(self, state: dict[str, Any]) -> None:
        restore_buffer(self, state)
