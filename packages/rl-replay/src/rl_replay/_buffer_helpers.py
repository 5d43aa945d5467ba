"""Argument checks, index checks and collate helpers of :class:`~rl_replay.ReplayBuffer`."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDictBase, is_tensor_collection

from rl_replay import _td
from rl_replay.storages import ListStorage


def _check_positive(name: str, value: int | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(
            f"ReplayBuffer expected {name} to be a positive int or None, got {value!r}."
        )
    return value


def _check_arguments(
    sampler: Any, storage: Any, batch_size: Any, prefetch: Any, shared: bool, dim_extend: Any
) -> tuple[int | None, int | None, int]:
    """Validate the buffer's batch_size, prefetch and dim_extend against its components."""
    batch_size = _check_positive("batch_size", batch_size)
    if batch_size is None and getattr(sampler, "drop_last", False):
        raise ValueError(
            f"Samplers with drop_last=True must work with a predictable batch-size: "
            f"{type(sampler).__name__}(drop_last=True) got batch_size=None. Pass "
            "batch_size to the buffer, or build the sampler with drop_last=False."
        )
    # prefetch=0 is TorchRL's spelling of "no prefetching", like None
    checked_prefetch = _check_positive("prefetch", None if prefetch == 0 else prefetch)
    if shared and checked_prefetch:
        raise ValueError(
            f"Cannot share prefetched replay buffers: got shared=True and prefetch="
            f"{prefetch}; prefetching threads live in one process. Pass prefetch=0 (or "
            "None) to share the buffer, or shared=False to keep prefetching."
        )
    ndim = getattr(storage, "ndim", 1)
    extend_dim = ndim - 1 if dim_extend is None else dim_extend
    if not 0 <= extend_dim < ndim:
        raise ValueError(
            f"ReplayBuffer expected 0 <= dim_extend < storage.ndim={ndim}, got {dim_extend}."
        )
    return batch_size, checked_prefetch, extend_dim


_GLOBAL_RNG_SWAP = threading.Lock()


def _sample_with_generator(
    sampler: Any, storage: Any, generator: torch.Generator, batch_size: int
) -> tuple[Any, dict[str, Any]]:
    """Sample with ``generator`` standing in for torch's global RNG, which samplers draw from.

    The swap is serialised: buffers sampling in other threads (prefetching) would
    otherwise draw from each other's generator state.
    """
    with _GLOBAL_RNG_SWAP, torch.random.fork_rng(devices=[]):
        torch.set_rng_state(generator.get_state())
        out = sampler.sample(storage, batch_size)
        generator.set_state(torch.get_rng_state())
    return out


def _check_in_range(index: Any, rows: int, owner: str) -> Any:  # Any: an index form
    """Wrap negative ints; raise IndexError for positions not written yet."""
    first = index[0] if isinstance(index, tuple) and index else index
    if isinstance(first, bool):
        return index
    if isinstance(first, int):
        low, high = first, first
    elif isinstance(first, torch.Tensor) and first.dtype not in (torch.bool, torch.uint8):
        if first.numel() == 0 or first.is_floating_point():
            return index
        low, high = int(first.min()), int(first.max())
    else:
        return index
    if low < -rows or high >= rows:
        found = first if isinstance(first, int) else f"positions from {low} to {high}"
        raise IndexError(
            f"{owner} index out of range: expected positions in [{-rows}, {rows}) (the "
            f"{rows} elements written along the first storage dim), got {found}. "
            "Positions past the length hold no data yet."
        )
    if low >= 0:
        return index
    if isinstance(index, int):
        return index + rows
    wrapped = torch.where(first < 0, first + rows, first)  # count from the length, not capacity
    return (wrapped, *index[1:]) if isinstance(index, tuple) else wrapped


def _identity(data: Any) -> Any:
    return data


def _stack_list(data: Any) -> Any:
    """Default collate of list storages: stack tensors/tensordicts, keep other lists."""
    if isinstance(data, list) and data:
        if all(isinstance(item, torch.Tensor) for item in data) or all(
            is_tensor_collection(item) for item in data
        ):
            return torch.stack(data)
    return data


def _default_collate(storage: Any) -> Callable[[Any], Any]:
    return _stack_list if isinstance(storage, ListStorage) else _identity


def _stack_items(items: list[Any]) -> Any:
    """A list of elements written to a tensor storage becomes one stacked batch."""
    if not items:
        raise ValueError("extend expected at least one element, got an empty list.")
    if isinstance(items[0], torch.Tensor) or is_tensor_collection(items[0]):
        return torch.stack(items)
    return _td.tree_map(lambda *leaves: torch.stack(leaves), items[0], *items[1:])


def _transpose(data: Any, dim: int) -> Any:
    if isinstance(data, torch.Tensor) or is_tensor_collection(data):
        return data.transpose(dim, 0)
    return _td.tree_map(lambda leaf: leaf.transpose(dim, 0), data)


def _made_a_batch(element: Any, data: Any) -> bool:  # Any: an element, and what inv made of it
    """Whether an inverse transform gave a batch of elements for one element."""
    return (
        isinstance(element, TensorDictBase)
        and isinstance(data, TensorDictBase)
        and data.batch_dims == element.batch_dims + 1
    )
