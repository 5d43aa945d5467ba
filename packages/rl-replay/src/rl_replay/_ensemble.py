"""Several buffers sampled as one: :class:`StorageEnsemble`, :class:`WriterEnsemble`,
:class:`ReplayBufferEnsemble`.

An ensemble index is ``(buffer_ids, indices)``: the picked buffers and, for each,
an index in that buffer's storage (this is what
:class:`~rl_replay.SamplerEnsemble` draws).  Writes go to the sub-buffers
(``rb_ensemble[i].extend(...)``); the ensemble itself is read-only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import is_tensor_collection

from rl_replay._buffer import ReplayBuffer
from rl_replay._buffer_helpers import _check_positive
from rl_replay.checkpointers.ensemble import StorageEnsembleCheckpointer
from rl_replay.samplers import SamplerEnsemble
from rl_replay.storages.base import Storage
from rl_replay.writers.base import Writer

__all__ = ["ReplayBufferEnsemble", "StorageEnsemble", "WriterEnsemble"]


def _read_only(owner: str) -> RuntimeError:
    return RuntimeError(
        f"{owner} is read-only: expected writes to go to one of its buffers, got a write on the "
        "ensemble. Use ensemble[i].extend(data) / ensemble[i].add(data)."
    )


def _states(members: list[Any]) -> dict[str, Any]:  # Any: storages or writers
    return {str(i): member.state_dict() for i, member in enumerate(members)}


def _load_states(
    owner: str, members: list[Any], state_dict: dict[str, Any]
) -> None:  # Any: see _states
    if len(state_dict) != len(members):
        raise ValueError(
            f"{owner}.load_state_dict expected {len(members)} states, got {len(state_dict)}. "
            "Load a state saved from an ensemble of the same size."
        )
    for i, member in enumerate(members):
        member.load_state_dict(state_dict[str(i)])


class StorageEnsemble(Storage):
    """An ensemble of storages.

    ``ensemble[i]`` is the ``i``-th storage; ``ensemble.get((buffer_ids, indices))``
    returns the list of the data read from each picked storage (through its
    transform, when ``transforms`` is given).

    Args:
        *storages (Storage): the storages.
        transforms (list of callables, optional): one transform (or ``None``) per
            storage, applied to the data read from it. Defaults to ``None``.

    Raises:
        ValueError: if no storage is given or ``transforms`` has another length.

    Examples:
        >>> import torch
        >>> from rl_replay import LazyTensorStorage, StorageEnsemble
        >>> first, second = LazyTensorStorage(4), LazyTensorStorage(4)
        >>> first.set(torch.arange(2), torch.tensor([1.0, 2.0]))
        >>> second.set(torch.arange(2), torch.tensor([3.0, 4.0]))
        >>> ensemble = StorageEnsemble(first, second)
        >>> ensemble.get((torch.tensor([1, 0]), [torch.tensor([0]), torch.tensor([1])]))
        [tensor([3.]), tensor([2.])]
    """

    _default_checkpointer = StorageEnsembleCheckpointer

    def __init__(
        self, *storages: Storage, transforms: Sequence[Callable[[Any], Any] | None] | None = None
    ) -> None:
        if not storages:
            raise ValueError("StorageEnsemble expected at least one storage, got none.")
        if transforms is not None and len(transforms) != len(storages):
            raise ValueError(
                f"StorageEnsemble expected one transform per storage ({len(storages)}), got {len(transforms)}."
            )
        super().__init__(sum(storage.max_size for storage in storages))
        self._storages = list(storages)
        self._transforms = list(transforms) if transforms is not None else [None] * len(storages)

    def __len__(self) -> int:
        return len(self._storages)

    def __getitem__(self, index: Any) -> Any:  # Any: an int or an ensemble index
        if isinstance(index, int):
            return self._storages[index]
        return self.get(index)

    def get(self, index: Any) -> list[Any]:  # Any: (buffer_ids, indices)
        """Read ``indices[k]`` from storage ``buffer_ids[k]`` for every ``k``."""
        buffer_ids, indices = index
        out = []
        for buffer, sub_index in zip(torch.as_tensor(buffer_ids).tolist(), indices, strict=True):
            data = self._storages[buffer].get(sub_index)
            transform = self._transforms[buffer]
            out.append(data if transform is None else transform(data))
        return out

    def set(self, cursor: Any, data: Any, *, set_cursor: bool = True) -> None:
        raise _read_only("StorageEnsemble")

    def _empty(self) -> None:
        for storage in self._storages:
            storage.empty()

    def state_dict(self) -> dict[str, Any]:
        return _states(self._storages)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        _load_states("StorageEnsemble", self._storages, state_dict)


class WriterEnsemble(Writer):
    """An ensemble of writers, one per buffer of a :class:`ReplayBufferEnsemble`.

    The ensemble does not write (write through the sub-buffers); it only
    carries the writers' state for checkpoints.

    Args:
        *writers (Writer): the writers.

    Raises:
        ValueError: if no writer is given.
        RuntimeError: on :meth:`add` and :meth:`extend`.

    Examples:
        >>> from rl_replay import RoundRobinWriter, WriterEnsemble
        >>> writers = WriterEnsemble(RoundRobinWriter(), RoundRobinWriter())
        >>> len(writers), writers.state_dict()
        (2, {'0': {'_cursor': 0}, '1': {'_cursor': 0}})
    """

    def __init__(self, *writers: Writer) -> None:
        if not writers:
            raise ValueError("WriterEnsemble expected at least one writer, got none.")
        super().__init__()
        self._writers = list(writers)

    def __len__(self) -> int:
        return len(self._writers)

    def __getitem__(self, index: int) -> Writer:
        return self._writers[index]

    def add(self, data: Any) -> Any:  # Any: rejected
        raise _read_only("WriterEnsemble")

    def extend(self, data: Any) -> Any:  # Any: rejected
        raise _read_only("WriterEnsemble")

    def _empty(self) -> None:
        for writer in self._writers:
            writer.empty()

    def state_dict(self) -> dict[str, Any]:
        return _states(self._writers)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        _load_states("WriterEnsemble", self._writers, state_dict)


class ReplayBufferEnsemble(ReplayBuffer):
    """An ensemble of replay buffers, sampled together.

    Each :meth:`sample` picks buffers (see :class:`~rl_replay.SamplerEnsemble`),
    reads a sub-batch from each through that buffer's own collate function and
    transform, merges the sub-batches with ``collate_fn`` (stacked by default:
    shape ``[num_buffer_sampled, batch_size // num_buffer_sampled, ...]``) and
    applies the ensemble's ``transform``.

    Args:
        *rbs (ReplayBuffer): the buffers.
        p (sequence of float, optional): the probability of picking each buffer.
            Defaults to ``None`` (uniform).
        sample_from_all (bool, optional): sample every buffer each time. Defaults to ``False``.
        num_buffer_sampled (int, optional): buffers picked per sample. Defaults to all.
        transform (callable, optional): applied to the merged batch. Defaults to ``None``.
            A stacked tensordict batch carries ``("index", "buffer_ids")``: the
            buffer each element comes from (added before ``transform``).
        batch_size (int, optional): the default batch size. Defaults to ``None``.
        collate_fn (callable, optional): merges the list of sub-batches. Defaults to stacking.

    Raises:
        ValueError: if no buffer is given.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rl_replay import LazyMemmapStorage, ReplayBufferEnsemble, TensorDictReplayBuffer
        >>> def rename(old):  # give both datasets the same keys
        ...     def transform(td):
        ...         return td.select("pixels").set("renamed", td.get(old))
        ...     return transform
        >>> rb0 = TensorDictReplayBuffer(storage=LazyMemmapStorage(10), transform=rename(("some", "key")))
        >>> rb1 = TensorDictReplayBuffer(storage=LazyMemmapStorage(10), transform=rename("another_key"))
        >>> rb = ReplayBufferEnsemble(rb0, rb1, p=[0.5, 0.5], transform=lambda td: td.set("twice", td["renamed"] * 2))
        >>> data0 = TensorDict({"pixels": torch.zeros(10, 3, 32, 32), ("some", "key"): torch.randn(10)}, [10])
        >>> data1 = TensorDict({"pixels": torch.ones(10, 3, 32, 32), "another_key": torch.randn(10)}, [10])
        >>> _ = rb[0].extend(data0)
        >>> _ = rb[1].extend(data1)
        >>> for _ in range(2):
        ...     sample = rb.sample(10)
        ...     assert sample["pixels"].shape == torch.Size([2, 5, 3, 32, 32])
        ...     assert sample["renamed"].shape == torch.Size([2, 5])
        ...     assert sample["twice"].shape == torch.Size([2, 5])
    """

    def __init__(
        self,
        *rbs: ReplayBuffer,
        p: Sequence[float] | torch.Tensor | None = None,
        sample_from_all: bool = False,
        num_buffer_sampled: int | None = None,
        transform: Callable[[Any], Any] | None = None,
        batch_size: int | None = None,
        collate_fn: Callable[[Any], Any] | None = None,
        **kwargs: Any,
    ) -> None:
        # kwargs: other ReplayBuffer keywords (prefetch, generator, ...), forwarded.
        if not rbs:
            raise ValueError("ReplayBufferEnsemble expected at least one replay buffer, got none.")
        self._rbs = list(rbs)
        super().__init__(
            storage=StorageEnsemble(*(rb.storage for rb in rbs)),
            sampler=SamplerEnsemble(
                *(rb.sampler for rb in rbs),
                p=p,
                sample_from_all=sample_from_all,
                num_buffer_sampled=num_buffer_sampled,
            ),
            writer=WriterEnsemble(*(rb.writer for rb in rbs)),
            transform=transform,
            batch_size=_check_positive("batch_size", batch_size),
            collate_fn=collate_fn if collate_fn is not None else _stack_batches,
            **kwargs,
        )

    def __getitem__(self, index: Any) -> Any:  # Any: an int picks a buffer
        if isinstance(index, int):
            return self._rbs[index]
        return super().__getitem__(index)

    def __len__(self) -> int:
        return len(self._rbs)

    def add(self, data: Any) -> int:
        raise _read_only("ReplayBufferEnsemble")

    def extend(self, data: Any, *, update_priority: bool | None = None) -> torch.Tensor:
        raise _read_only("ReplayBufferEnsemble")

    def _sample(self, batch_size: int) -> tuple[Any, dict[str, Any]]:
        with self._lock:
            (buffer_ids, indices), info = self._sampler.sample(self._storage, batch_size)
        parts = [
            self._rbs[buffer]._read(sub_index)
            for buffer, sub_index in zip(buffer_ids.tolist(), indices, strict=True)
        ]
        info["index"] = (buffer_ids, indices)
        data = self._collate_fn(parts)
        if _can_carry_ids(data, buffer_ids):
            # which buffer each element of a stacked tensordict sample comes from
            ids = buffer_ids.reshape(-1, *([1] * (data.batch_dims - 1))).expand(data.shape)
            data.set(("index", "buffer_ids"), ids.to(data.device) if data.device else ids)
        if len(self._transform):
            data = self._transform(data)
        return data, info


def _can_carry_ids(data: Any, buffer_ids: torch.Tensor) -> bool:
    """Whether ``data`` is a stacked tensordict sample with room for ``("index", "buffer_ids")``."""
    if not is_tensor_collection(data) or not data.batch_dims:
        return False
    if data.shape[0] != buffer_ids.numel():
        return False
    index = data.get("index", None)
    return index is None or is_tensor_collection(index)


def _stack_batches(parts: list[Any]) -> Any:
    if all(isinstance(part, torch.Tensor) for part in parts) or all(
        is_tensor_collection(part) for part in parts
    ):
        return torch.stack(parts)
    return parts
