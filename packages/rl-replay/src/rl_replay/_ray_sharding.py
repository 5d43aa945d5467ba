"""How a sharded :class:`~rl_replay.RayReplayBuffer` splits a sample and merges the parts.

A sample of ``batch_size`` is drawn from the shards in proportion to their mass
(size, or total priority for prioritized samplers), in whole slices for slice
samplers; the parts come back as one batch, with importance weights normalised
over every shard. Plus the argument checks made before any actor starts.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["check_int", "check_layout", "global_index", "merge_parts", "route", "shard_counts"]


def _slice_error(num_slices: int) -> ValueError:
    return ValueError(
        f"A sharded RayReplayBuffer splits samples in whole slices, so its slice sampler "
        f"needs slice_len=..., got num_slices={num_slices}. Build the sampler with slice_len."
    )


def shard_counts(batch_size: int, masses: list[float], unit: tuple[str, Any]) -> list[int]:
    """How many elements each shard gives to a sample of ``batch_size``.

    ``unit`` is ``("len", slice_len)`` for slice samplers with a fixed slice length,
    ``("num", num_slices)`` for those with a number of slices, else ``("num", None)``.

    Raises:
        ValueError: if the batch cannot be cut into whole slices.
        RuntimeError: if every shard is empty.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> sum(shard_counts(8, [3.0, 1.0], ("num", None)))
        8
    """
    kind, value = unit
    if kind == "len":
        size = value
    elif value:
        raise _slice_error(value)
    else:
        size = 1
    if batch_size % size:
        raise ValueError(
            f"RayReplayBuffer could not split a batch of {batch_size} into whole slices of "
            f"{size} across {len(masses)} shards. Pass a batch_size multiple of {size}."
        )
    weights = torch.tensor(masses, dtype=torch.double)
    if not weights.sum() > 0:
        raise RuntimeError(
            "RayReplayBuffer cannot sample: every shard is empty. Extend the buffer first."
        )
    draws = torch.multinomial(weights, batch_size // size, replacement=True)
    return (torch.bincount(draws, minlength=len(masses)) * size).tolist()


def merge_parts(
    parts: list[tuple[int, Any, dict[str, Any]]], lowest: list[float] | None, beta: float
) -> tuple[Any, dict[str, Any]]:  # Any: a batch of the storage's form
    """One batch and its info from the ``(shard, data, info)`` parts of a sample.

    ``lowest`` holds each part's shard's smallest priority (prioritized samplers):
    the weights are rescaled to the smallest of all shards, as one buffer would.
    """
    if len(parts) == 1:
        _, data, info = parts[0]
        return data, info
    if lowest is not None:
        low = min(lowest)
        for (_, _, info), shard_low in zip(parts, lowest, strict=True):
            info["priority_weight"] = info["priority_weight"] * (shard_low / low) ** (-beta)
    data = torch.cat([part[1] for part in parts])
    info: dict[str, Any] = {}
    for key in parts[0][2]:
        values = [part[2][key] for part in parts]
        info[key] = torch.cat(values) if isinstance(values[0], torch.Tensor) else values
    info["shard"] = torch.cat([torch.full((part[1].shape[0],), part[0]) for part in parts])
    return data, info


def check_layout(storage: Any, sampler: Any, rate_limiter: Any, num_shards: int) -> None:
    """Refuse, before any actor starts, what the shards would refuse (instances only)."""
    if (
        num_shards > 1
        and getattr(sampler, "num_slices", None)
        and not getattr(sampler, "slice_len", None)
    ):
        raise _slice_error(sampler.num_slices)
    size, capacity = getattr(rate_limiter, "size", None), getattr(storage, "max_size", None)
    if getattr(rate_limiter, "fifo", False) and isinstance(capacity, int) and size > capacity:
        raise ValueError(
            f"Queue(size={size}) holds more items than the storage (max_size={capacity}); "
            f"unread items would be overwritten. Use Queue(size<={capacity}) or a bigger storage."
        )


def check_int(name: str, value: Any, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(
            f"RayReplayBuffer expected {name} to be an int >= {minimum}, got {value!r}."
        )


def global_index(index: Any, shard: int, capacity: int) -> Any:  # Any: an int or a tensor
    """A shard's local index as the buffer's global one (shard ``k`` owns ``k * capacity`` on).

    Raises:
        ValueError: a multi-dim index (a tuple) from a sharded buffer.
    """
    if shard == 0:
        return index
    if isinstance(index, (int, torch.Tensor)):
        return index + shard * capacity
    raise ValueError(
        f"A sharded RayReplayBuffer needs one-dim indices, got {type(index).__name__}. "
        "Use num_shards=1 with multi-dim storages."
    )


def route(index: Any, num_shards: int, capacity: int) -> dict[int, tuple[Any, Any]]:
    """Global indices -> {shard: (positions in the input, local indices)}."""
    if num_shards == 1:
        return {0: (None, index)}
    flat = torch.as_tensor(index).reshape(-1)
    shard_of = torch.div(flat, capacity, rounding_mode="floor")
    out = {}
    for shard in shard_of.unique().tolist():
        where = (shard_of == shard).nonzero().squeeze(-1)
        out[shard] = (where, flat[where] - shard * capacity)
    return out
