"""TensorDict and prioritized buffers.

:class:`TensorDictReplayBuffer` writes the sampled ``"index"`` (and the
sampler's per-sample info such as ``"priority_weight"``) into the sampled
tensordict and reads priorities back from ``priority_key``.  The prioritized
variants only pick a :class:`~rl_replay.PrioritizedSampler`.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase, is_tensor_collection
from tensordict.utils import NestedKey

from rl_replay._buffer import ReplayBuffer
from rl_replay.samplers import PrioritizedSampler
from rl_replay.storages import ListStorage
from rl_replay.writers import TensorDictRoundRobinWriter

__all__ = [
    "PrioritizedReplayBuffer",
    "TensorDictPrioritizedReplayBuffer",
    "TensorDictReplayBuffer",
]


class TensorDictReplayBuffer(ReplayBuffer):
    """TensorDict-specific wrapper around the ReplayBuffer class.

    Sampled tensordicts carry the sampled ``"index"`` (stacked to shape
    ``[batch, ndim]`` for multi-dim storages) and every per-sample entry of the
    sampler's info; :meth:`update_tensordict_priority` reads ``priority_key``
    back.  When written data carries ``priority_key``, it sets the priorities of
    the written elements.

    Args:
        priority_key (NestedKey, optional): the key of the priorities. Defaults to ``"td_error"``.
        **kwargs: the keyword arguments of :class:`ReplayBuffer`; the default
            writer is :class:`~rl_replay.TensorDictRoundRobinWriter`.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rl_replay import LazyTensorStorage, TensorDictReplayBuffer
        >>> rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10), batch_size=4)
        >>> _ = rb.extend(TensorDict({"obs": torch.arange(6.0)}, [6]))
        >>> sample = rb.sample()
        >>> bool((sample["obs"] == sample["index"].float()).all())
        True
    """

    def __init__(self, *, priority_key: NestedKey = "td_error", **kwargs: Any) -> None:
        # kwargs: the documented ReplayBuffer keywords, forwarded unchanged.
        super().__init__(**kwargs)
        self.priority_key = priority_key

    def _default_writer(self) -> Any:
        return TensorDictRoundRobinWriter()

    def _sample(self, batch_size: int) -> tuple[Any, dict[str, Any]]:
        data, info = super()._sample(batch_size)
        if is_tensor_collection(data):
            _write_info(data, info, batch_size)
        return data, info

    def add(self, data: TensorDictBase) -> int:
        index = super().add(data)
        if index is not None:
            self._set_written_priority(data, torch.as_tensor([index]), single=True)
        return index

    def extend(
        self, data: Any, *, update_priority: bool | None = None
    ) -> torch.Tensor:  # Any: a tensordict (or list of them)
        """Write a batch; set the written elements' priorities from ``priority_key``.

        Args:
            data (TensorDictBase or list of them): the elements.
            update_priority (bool, optional): ``False`` keeps the default priority of the
                written elements even when ``data`` carries ``priority_key``. Defaults to
                ``None`` (read ``priority_key`` when present).
        """
        index = super().extend(data)
        if update_priority is not False:
            self._set_written_priority(data, index, single=False)
        return index

    def _set_written_priority(self, data: Any, index: torch.Tensor, *, single: bool) -> None:
        if not is_tensor_collection(data) or self.priority_key not in data.keys(True):
            return
        priority = data.get(self.priority_key)
        if single:
            priority = priority.unsqueeze(0)
        elif self.dim_extend > 0:
            priority = priority.transpose(self.dim_extend, 0)
        if index.numel() == priority.shape[0]:
            self.update_priority(
                _rows_index(index, self._storage), _per_element(priority, self._storage)
            )

    def update_tensordict_priority(self, data: TensorDictBase) -> None:
        """Set the priorities of the elements of a sampled tensordict from ``priority_key``.

        Raises:
            KeyError: if ``data`` lacks ``"index"`` or ``priority_key``.
        """
        for key in ("index", self.priority_key):
            if key not in data.keys(True):
                raise KeyError(
                    f"update_tensordict_priority expected the key {key!r} in the tensordict; found "
                    f"{sorted(str(k) for k in data.keys(True, True))}. Pass a sampled tensordict "
                    "with its priorities set."
                )
        index = data.get("index")
        if index.ndim > 1 and getattr(self._storage, "ndim", 1) > 1:
            index = index.unbind(-1)
        self.update_priority(index, data.get(self.priority_key))


class PrioritizedReplayBuffer(ReplayBuffer):
    """Prioritized replay buffer.

    A :class:`ReplayBuffer` with a :class:`~rl_replay.PrioritizedSampler`
    (Schaul et al., 2015): elements are drawn with probability proportional to
    ``priority ** alpha`` and weighted by importance-sampling weights.

    Args:
        alpha (float): the priority exponent.
        beta (float): the importance-sampling exponent.
        eps (float, optional): added to every priority. Defaults to ``1e-8``.
        dtype (torch.dtype, optional): the dtype of the priority trees. Defaults to ``torch.float``.
        storage, collate_fn, pin_memory, prefetch, transform, batch_size, dim_extend:
            see :class:`ReplayBuffer`.

    Examples:
        >>> import torch
        >>> from rl_replay import ListStorage, PrioritizedReplayBuffer
        >>> rb = PrioritizedReplayBuffer(alpha=0.7, beta=0.9, storage=ListStorage(10))
        >>> _ = rb.extend(torch.arange(4))
        >>> rb.update_priority(torch.arange(4), torch.tensor([0.0, 0.0, 0.0, 1.0]))
        >>> sample, info = rb.sample(5, return_info=True)
        >>> sample.tolist(), sorted(info)
        ([3, 3, 3, 3, 3], ['index', 'priority_weight'])
    """

    def __init__(
        self,
        *,
        alpha: float,
        beta: float,
        eps: float = 1e-8,
        dtype: torch.dtype = torch.float,
        storage: Any = None,  # Any: a Storage
        collate_fn: Any = None,  # Any: a callable
        pin_memory: bool = False,
        prefetch: int | None = None,
        transform: Any = None,  # Any: a callable
        batch_size: int | None = None,
        dim_extend: int | None = None,
        **kwargs: Any,
    ) -> None:
        # kwargs: the other ReplayBuffer keywords (writer, generator, ...), forwarded.
        storage = storage if storage is not None else ListStorage(max_size=1_000)
        sampler = PrioritizedSampler(storage.max_size, alpha, beta, eps=eps, dtype=dtype)
        super().__init__(
            storage=storage,
            sampler=sampler,
            collate_fn=collate_fn,
            pin_memory=pin_memory,
            prefetch=prefetch,
            transform=transform,
            batch_size=batch_size,
            dim_extend=dim_extend,
            **kwargs,
        )


class TensorDictPrioritizedReplayBuffer(TensorDictReplayBuffer):
    """TensorDict-specific wrapper around the PrioritizedReplayBuffer class.

    Args:
        alpha (float): the priority exponent.
        beta (float): the importance-sampling exponent.
        priority_key (NestedKey, optional): the key of the priorities. Defaults to ``"td_error"``.
        eps (float, optional): added to every priority. Defaults to ``1e-8``.
        reduction (str, optional): how priorities with trailing dims are reduced
            to one per element. Defaults to ``"max"``.
        **kwargs: the other :class:`ReplayBuffer` keywords.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rl_replay import LazyTensorStorage, TensorDictPrioritizedReplayBuffer
        >>> rb = TensorDictPrioritizedReplayBuffer(
        ...     alpha=0.7, beta=1.1, storage=LazyTensorStorage(10), batch_size=8)
        >>> data = TensorDict({"a": torch.arange(4), "td_error": torch.tensor([0.0, 0.0, 1.0, 0.0])}, [4])
        >>> _ = rb.extend(data)  # priorities are read from "td_error" at write time
        >>> sample = rb.sample()
        >>> sample["a"].unique().tolist(), sample["priority_weight"].shape
        ([2], torch.Size([8]))
        >>> sample["td_error"] = torch.full((8,), 0.5)
        >>> rb.update_tensordict_priority(sample)  # reads "index" and "td_error"
    """

    def __init__(
        self,
        *,
        alpha: float,
        beta: float,
        priority_key: NestedKey = "td_error",
        eps: float = 1e-8,
        storage: Any = None,  # Any: a Storage
        reduction: str = "max",
        **kwargs: Any,
    ) -> None:
        # kwargs: the other ReplayBuffer keywords (batch_size, transform, ...), forwarded.
        storage = storage if storage is not None else ListStorage(max_size=1_000)
        sampler = PrioritizedSampler(storage.max_size, alpha, beta, eps=eps, reduction=reduction)
        super().__init__(priority_key=priority_key, storage=storage, sampler=sampler, **kwargs)


def _write_info(data: TensorDictBase, info: dict[str, Any], batch_size: int) -> None:
    index = info["index"]
    if isinstance(index, tuple):
        index = torch.stack(index, -1)
    leading = data.batch_size[:1]
    if index.shape[:1] == leading:
        data.set("index", _expand_to(index, data.batch_size, 1 if index.ndim > 1 else 0))
    for key, value in info.items():
        if key != "index" and isinstance(value, torch.Tensor) and value.shape[:1] == leading:
            data.set(key, _expand_to(value, data.batch_size, value.ndim - 1))


def _expand_to(value: torch.Tensor, batch_size: torch.Size, tail: int) -> torch.Tensor:
    """Repeat a per-sample ``value`` ([N, *tail]) over the other batch dims of the samples.

    Elements stored as whole trajectories come back with batch ``[N, T]``: their index
    and weights are then given to every step, as TorchRL does.
    """
    extra = len(batch_size) - (value.ndim - tail)
    if extra <= 0:
        return value
    shape = value.shape
    return value.view(shape[0], *([1] * extra), *shape[1:]).expand(
        *batch_size, *shape[len(shape) - tail :]
    )


def _rows_index(rows: torch.Tensor, storage: Any) -> Any:
    """Cursor-dim rows -> the storage index form of every element in those rows."""
    if getattr(storage, "ndim", 1) == 1:
        return rows
    inner = storage.shape[1:].numel()
    flat = (rows.unsqueeze(-1) * inner + torch.arange(inner)).reshape(-1)
    return torch.unravel_index(flat, tuple(storage.shape))


def _per_element(priority: torch.Tensor, storage: Any) -> torch.Tensor:
    ndim = getattr(storage, "ndim", 1)
    return priority if ndim == 1 else priority.reshape(-1, *priority.shape[ndim:])
