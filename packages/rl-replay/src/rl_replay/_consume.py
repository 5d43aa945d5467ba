"""``ReplayBuffer(consume_after_n_samples=n)``: checks and writes into consumed slots."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import is_tensor_collection

from rl_replay import _td
from rl_replay.samplers import RandomSampler
from rl_replay.samplers._consuming import ConsumeAfterN
from rl_replay.samplers.base import Sampler
from rl_replay.storages._generations import generations_on
from rl_replay.storages.base import Storage

__all__ = ["consuming_sampler", "write_consumed_slots"]


def consuming_sampler(
    consume_after_n_samples: Any, sampler: Sampler | None, storage: Storage, prefetch: Any
) -> Sampler | None:
    """The sampler of a consuming buffer (``None`` when ``consume_after_n_samples`` is None).

    Raises:
        TypeError: if ``consume_after_n_samples`` is not an int.
        ValueError: if it is below 1, or combined with prefetching, a sampler
            other than :class:`~rl_replay.RandomSampler` or a multi-dim storage.
    """
    if consume_after_n_samples is None:
        return sampler
    count = consume_after_n_samples
    if isinstance(count, bool) or not isinstance(count, int):
        raise TypeError(
            f"ReplayBuffer expected consume_after_n_samples to be a positive integer, got "
            f"{count!r}."
        )
    if count < 1:
        raise ValueError(
            f"ReplayBuffer expected consume_after_n_samples to be a positive integer, got {count}."
        )
    if prefetch:
        raise ValueError(
            f"Prefetching is not supported when consume_after_n_samples is set (got prefetch="
            f"{prefetch}): prefetched batches would consume elements nobody reads. Drop prefetch."
        )
    if sampler is not None and type(sampler) is not RandomSampler:
        raise ValueError(
            "consume_after_n_samples only supports the default RandomSampler, got "
            f"{type(sampler).__name__}. Drop the sampler argument."
        )
    if getattr(storage, "ndim", 1) != 1:
        raise ValueError(
            "consume_after_n_samples supports 1-dimensional storages only, got a storage with "
            f"ndim={storage.ndim}. Build the storage with ndim=1."
        )
    return ConsumeAfterN(count)


def write_consumed_slots(
    sampler: Sampler, storage: Storage, data: Any, single: bool
) -> tuple[torch.Tensor | None, Any]:
    """Write the head of ``data`` into consumed slots; return their indices and the rest.

    The rest (``None`` when nothing is left) goes through the writer as usual.
    """
    if not isinstance(sampler, ConsumeAfterN):
        return None, data
    count = 1 if single else _length(data)
    slots = sampler.take_free(count)
    if not slots:
        return None, data
    index = torch.tensor(slots, dtype=torch.int64)
    taken = len(slots)
    if single:
        storage.set(slots[0], data, set_cursor=False)
        head_rest = None
    else:
        storage.set(index, _head(data, taken), set_cursor=False)
        head_rest = _tail(data, taken) if taken < count else None
    counters = generations_on(storage)
    if counters is not None:
        counters.stamp(index)
    return index, head_rest


def _length(data: Any) -> int:
    if isinstance(data, list):
        return len(data)
    if is_tensor_collection(data) or isinstance(data, torch.Tensor):
        return data.shape[0]
    return _td.tree_leaves(data)[0].shape[0]


def _head(data: Any, count: int) -> Any:
    if isinstance(data, list) or is_tensor_collection(data) or isinstance(data, torch.Tensor):
        return data[:count]
    return _td.tree_map(lambda leaf: leaf[:count], data)


def _tail(data: Any, count: int) -> Any:
    if isinstance(data, list) or is_tensor_collection(data) or isinstance(data, torch.Tensor):
        return data[count:]
    return _td.tree_map(lambda leaf: leaf[count:], data)
