"""Sampling from several storages at once: :class:`SamplerEnsemble`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from rl_replay.samplers.base import Sampler, check_batch_size

__all__ = ["SamplerEnsemble"]


class SamplerEnsemble(Sampler):
    """An ensemble of samplers.

    Used with a storage ensemble (any object whose ``_storages`` attribute lists one
    storage per sampler, such as ``StorageEnsemble``): each sample picks
    ``num_buffer_sampled`` buffers (with probabilities ``p``, uniformly when ``p`` is
    ``None``, or every buffer once with ``sample_from_all=True``) and draws
    ``batch_size // num_buffer_sampled`` elements from each with its own sampler.

    The index is ``(buffer_ids, indices)``: ``buffer_ids`` a ``LongTensor`` of the picked
    buffers and ``indices`` the list of the per-buffer indices, in the same order. ``info``
    holds ``"buffer_ids"`` and ``"infos"``, the list of the per-buffer ``info`` dicts.

    Args:
        *samplers (Sampler): one sampler per storage of the ensemble.
        p (sequence of float or torch.Tensor, optional): the probability of each buffer
            (normalised). Defaults to ``None`` (uniform).
        sample_from_all (bool, optional): sample every buffer once per call; exclusive with
            ``p``. Defaults to ``False``.
        num_buffer_sampled (int, optional): buffers picked per sample. Defaults to the
            number of samplers.

    Raises:
        ValueError: if no sampler is given, ``p`` has the wrong length, negative values or
            sums to zero, or both ``p`` and ``sample_from_all`` are given.

    Examples:
        >>> import torch
        >>> from rl_replay.samplers import RandomSampler, SamplerEnsemble
        >>> class Storage:
        ...     ndim = 1
        ...     def __init__(self, size):
        ...         self.size = size
        ...     def __len__(self):
        ...         return self.size
        >>> class Ensemble:
        ...     _storages = [Storage(3), Storage(100)]
        >>> sampler = SamplerEnsemble(RandomSampler(), RandomSampler(), sample_from_all=True)
        >>> (buffer_ids, indices), info = sampler.sample(Ensemble(), 10)
        >>> buffer_ids.tolist(), [int(index.max() < 3) for index in indices][:1]
        ([0, 1], [1])
    """

    def __init__(
        self,
        *samplers: Sampler,
        p: Sequence[float] | torch.Tensor | None = None,
        sample_from_all: bool = False,
        num_buffer_sampled: int | None = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        if not samplers:
            raise ValueError(
                f"{name} expected at least one sampler, got none. Pass samplers positionally."
            )
        if p is not None and sample_from_all:
            raise ValueError(
                f"{name} expected either p or sample_from_all=True, got both. Drop p to sample "
                "every buffer, or sample_from_all to draw buffers with probabilities p."
            )
        if p is not None:
            p = torch.as_tensor(p, dtype=torch.float)
            if p.shape != (len(samplers),) or bool((p < 0).any()) or not bool(p.sum() > 0):
                raise ValueError(
                    f"{name} expected p to hold {len(samplers)} non-negative values with a "
                    f"positive sum, got {p.tolist()}. Pass one probability per sampler."
                )
            p = p / p.sum()
        count = len(samplers) if num_buffer_sampled is None else num_buffer_sampled
        if isinstance(count, bool) or not isinstance(count, int) or count <= 0:
            raise ValueError(
                f"{name} expected num_buffer_sampled to be a positive int, got {count!r}."
            )
        self._samplers = list(samplers)
        self.p = p
        self.sample_from_all = sample_from_all
        self.num_buffer_sampled = len(samplers) if sample_from_all else count

    def __len__(self) -> int:
        return len(self._samplers)

    def __getitem__(self, index: int) -> Sampler:
        return self._samplers[index]

    def sample(self, storage: Any, batch_size: int) -> tuple[Any, dict[str, Any]]:
        """Pick buffers, then draw a sub-batch from each with its sampler.

        Raises:
            ValueError: if ``batch_size`` is not a multiple of ``num_buffer_sampled``.
            TypeError: if ``storage`` has no ``_storages`` list matching the samplers.
        """
        name = type(self).__name__
        check_batch_size(batch_size, name)
        if batch_size % self.num_buffer_sampled:
            raise ValueError(
                f"{name} expected batch_size to be a multiple of num_buffer_sampled="
                f"{self.num_buffer_sampled}, got {batch_size}."
            )
        storages = getattr(storage, "_storages", None)
        if storages is None or len(storages) != len(self._samplers):
            raise TypeError(
                f"{name} expected a storage ensemble holding {len(self._samplers)} storages, got "
                f"{type(storage).__name__}. Use it with a StorageEnsemble / ReplayBufferEnsemble."
            )
        if self.sample_from_all:
            buffer_ids = torch.arange(len(self._samplers))
        elif self.p is None:
            buffer_ids = torch.randint(len(self._samplers), (self.num_buffer_sampled,))
        else:
            buffer_ids = torch.multinomial(self.p, self.num_buffer_sampled, replacement=True)
        sub_batch = batch_size // self.num_buffer_sampled
        draws = [self._samplers[i].sample(storages[i], sub_batch) for i in buffer_ids.tolist()]
        indices = [index for index, _ in draws]
        return (buffer_ids, indices), {
            "buffer_ids": buffer_ids,
            "infos": [info for _, info in draws],
        }

    def update_priority(
        self, index: Any, priority: float | torch.Tensor, *, storage: Any = None
    ) -> None:  # Any: an ensemble index (buffer_ids, indices)
        """Forward priorities to each buffer's sampler.

        ``priority`` is a scalar or the concatenation of the per-buffer priorities in the
        order of ``index``.
        """
        buffer_ids, indices = index
        priority = torch.as_tensor(priority)
        start = 0
        for buffer, sub_index in zip(buffer_ids.tolist(), indices):
            count = _index_len(sub_index)
            chunk = priority if priority.numel() == 1 else priority[start : start + count]
            sub_storage = None if storage is None else storage._storages[buffer]
            self._samplers[buffer].update_priority(sub_index, chunk, storage=sub_storage)
            start += count

    def _empty(self) -> None:
        for sampler in self._samplers:
            sampler.empty()

    def state_dict(self) -> dict[str, Any]:
        """Return every sampler's state, keyed by its position."""
        return {str(i): sampler.state_dict() for i, sampler in enumerate(self._samplers)}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`.

        Raises:
            ValueError: if the state holds another number of samplers.
        """
        if len(state_dict) != len(self._samplers):
            raise ValueError(
                f"{type(self).__name__}.load_state_dict expected states for {len(self._samplers)} "
                f"samplers, got {len(state_dict)}. Load a state saved from the same ensemble."
            )
        for i, sampler in enumerate(self._samplers):
            sampler.load_state_dict(state_dict[str(i)])

    def __repr__(self) -> str:
        inner = ", ".join(repr(sampler) for sampler in self._samplers)
        return f"{type(self).__name__}({inner}, num_buffer_sampled={self.num_buffer_sampled})"


def _index_len(index: Any) -> int:
    if isinstance(index, (tuple, list)):
        return int(index[0].numel())
    return int(index.numel())
