"""Conditional record updates: :meth:`ReplayBuffer.update_if_present` and its result.

A handle on a stored record is its ``(index, generation)`` pair.  A patch lands
only on records whose slot still has the generation the handle carries (and,
with ``version_key``, whose stored version loses to the incoming one).  The
whole patch is checked before anything is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDictBase, unravel_key
from tensordict.utils import NestedKey

from rl_replay.storages.tensor import TensorStorage

__all__ = ["ConditionalUpdateResult", "update_if_present"]


@dataclass
class ConditionalUpdateResult:
    """Result of :meth:`~rl_replay.ReplayBuffer.update_if_present`.

    Every record addressed by the update lands in exactly one of three groups:
    updated, version-rejected (live but lost the version comparison, or a
    duplicate handle that did not carry the highest version) and stale (its
    slot was rewritten or emptied since the handle was taken).

    Attributes:
        updated (torch.Tensor): a bool mask in the order of the given indices,
            ``True`` where the record received the patch.
        version_rejected (torch.Tensor, optional): a bool mask like ``updated``,
            ``True`` where a live record lost the version comparison; ``None``
            when the update had no ``version_key``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rl_replay import LazyTensorStorage, ReplayBuffer, RoundRobinWriter
        >>> rb = ReplayBuffer(storage=LazyTensorStorage(2),
        ...     writer=RoundRobinWriter(track_generations=True))
        >>> index = rb.extend(TensorDict({"x": torch.zeros(2)}, [2]))
        >>> result = rb.update_if_present(index=index, generation=torch.tensor([0, 7]),
        ...     patch={"x": torch.ones(2)})  # the second handle names no live record
        >>> result.updated_count, result.stale_count, result.version_rejected_count
        (1, 1, 0)
    """

    updated: torch.Tensor
    version_rejected: torch.Tensor | None = None

    @property
    def updated_count(self) -> int:
        """The number of records that received the patch."""
        return int(self.updated.sum())

    @property
    def version_rejected_count(self) -> int:
        """The number of live records rejected by the version comparison (0 without one)."""
        return 0 if self.version_rejected is None else int(self.version_rejected.sum())

    @property
    def stale_count(self) -> int:
        """The number of records whose slot no longer holds the handle's generation."""
        return self.updated.numel() - self.updated_count - self.version_rejected_count


def update_if_present(
    buffer: Any,  # Any: a ReplayBuffer (its storage, writer and lock are used)
    index: Any,
    generation: Any,
    patch: Mapping[NestedKey, torch.Tensor] | TensorDictBase,
    version_key: NestedKey | None,
    version: int | torch.Tensor | None,
    require_newer: bool,
) -> ConditionalUpdateResult:
    """Body of :meth:`ReplayBuffer.update_if_present` (see there)."""
    storage, writer = buffer._storage, buffer._writer
    if not isinstance(storage, TensorStorage):
        raise RuntimeError(
            f"update_if_present needs a storage that supports conditional updates (a "
            f"TensorStorage, LazyTensorStorage or LazyMemmapStorage), got {type(storage).__name__}."
            " Store the data in a tensor storage to patch records in place."
        )
    if not writer.tracks_generations:
        raise RuntimeError(
            f"update_if_present needs a writer that tracks slot generations to make conditional "
            f"updates, got {type(writer).__name__} without them. Build the buffer with "
            "writer=RoundRobinWriter(track_generations=True) (or TensorDictRoundRobinWriter)."
        )
    if (version_key is None) != (version is None):
        raise ValueError(
            "update_if_present expected version_key and version together, got "
            f"version_key={version_key!r} and version={version!r}. Pass both or neither."
        )
    slots = torch.as_tensor(index[0] if isinstance(index, tuple) else index, dtype=torch.int64)
    if slots.ndim == 2 and slots.shape[-1] == getattr(storage, "ndim", 1) > 1:
        slots = slots[:, 0]
    slots = slots.reshape(-1)
    count = slots.numel()
    generation = torch.as_tensor(generation, dtype=torch.int64).reshape(-1)
    if generation.numel() != count:
        raise ValueError(
            f"update_if_present expected one generation per index ({count}), got "
            f"{generation.numel()}. Pass the 'index_generation' taken with the indices."
        )
    with buffer._lock:
        entries = _check_patch(storage, patch, count)
        version_entry = None
        if version_key is not None:
            version_key, version_entry, version = _check_version(
                storage, version_key, version, entries, count
            )
        live = (writer.generations_of(slots) == generation) & (generation >= 0)
        if version_entry is None:
            updated, rejected = live, None
        else:
            stored = version_entry[slots.clamp(0, version_entry.shape[0] - 1)].reshape(count)
            wins = version > stored if require_newer else version >= stored
            updated = _best_per_slot(slots, version, live & wins)
            rejected = live & ~updated
            entries.append((version_entry, version.reshape(count, *version_entry.shape[1:])))
        if updated.any():
            rows = slots[updated]
            for target, value in entries:
                target[rows] = value[updated].to(target.device)
    return ConditionalUpdateResult(updated=updated, version_rejected=rejected)


def _check_patch(
    storage: TensorStorage, patch: Any, count: int
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    items = patch.items(True, True) if isinstance(patch, TensorDictBase) else patch.items()
    entries = []
    for key, value in items:
        target = storage._get_entry(unravel_key(key))  # KeyError for unknown keys
        value = torch.as_tensor(value)
        expected = (count, *target.shape[1:])
        if tuple(value.shape) != expected:
            raise ValueError(
                f"update_if_present expected the patch entry {key!r} to have shape "
                f"{list(expected)} (one row per index), got {list(value.shape)}."
            )
        if value.dtype != target.dtype:
            raise ValueError(
                f"update_if_present expected the patch entry {key!r} to have dtype "
                f"{target.dtype}, got {value.dtype}. Cast it first."
            )
        entries.append((target, value))
    return entries


def _check_version(
    storage: TensorStorage,
    version_key: NestedKey,
    version: int | torch.Tensor,
    entries: list[tuple[torch.Tensor, torch.Tensor]],
    count: int,
) -> tuple[NestedKey, torch.Tensor, torch.Tensor]:
    if isinstance(version_key, str) and "." in version_key:
        raise ValueError(
            f"Dotted-string version_key {version_key!r} refused: update_if_present expects nested "
            f"keys in tuple form. Pass {tuple(version_key.split('.'))!r}."
        )
    version_key = unravel_key(version_key)
    target = storage._get_entry(version_key)  # KeyError when not stored
    if any(stored is target for stored, _ in entries):
        raise ValueError(
            f"update_if_present: version_key {version_key!r} may not appear in patch; the "
            "accepted version is written into it. Drop it from the patch."
        )
    if target.shape[1:].numel() != 1:
        raise ValueError(
            f"update_if_present expected version_key {version_key!r} to name one scalar per "
            f"record, found entries of shape {list(target.shape[1:])}."
        )
    version = torch.as_tensor(version, dtype=target.dtype)
    if version.numel() == 1:
        version = version.reshape(()).expand(count)
    elif version.numel() == count:
        version = version.reshape(count)
    else:
        raise ValueError(
            f"update_if_present expected version to be a scalar or one entry per index "
            f"({count}), got {version.numel()} entries."
        )
    return version_key, target, version


def _best_per_slot(slots: torch.Tensor, version: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Among kept rows naming the same slot, keep the highest version (the last on ties)."""
    if not keep.any() or torch.unique(slots[keep]).numel() == int(keep.sum()):
        return keep
    size = int(slots.max()) + 1
    best = torch.full((size,), -torch.inf, dtype=torch.float64)
    version = version.to(torch.float64)
    masked = torch.where(keep, version, torch.full_like(version, -torch.inf))
    best.scatter_reduce_(0, slots, masked, reduce="amax")
    keep = keep & (masked == best[slots])
    position = torch.where(keep, torch.arange(slots.numel()), torch.full_like(slots, -1))
    last = torch.full((size,), -1, dtype=torch.int64).scatter_reduce_(
        0, slots, position, reduce="amax"
    )
    return keep & (position == last[slots])
