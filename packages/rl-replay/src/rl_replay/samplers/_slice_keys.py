"""Which stored entry marks the trajectories of a slice sampler, and how it is read.

A slice sampler finds trajectories either from ids (``"traj"`` mode: consecutive steps
with the same id) or from end flags (``"end"`` mode: ``True`` on the last step). The
entry is picked from an ordered list of candidates, the first one the data carries:

* ``traj_key`` and ``end_key`` given: the ids, else the end flags;
* only ``traj_key``: the ids, else ``("next", "done")``;
* only ``end_key``: the end flags, else ``("collector", "traj_ids")``, else ``"episode"``;
* neither: ``("collector", "traj_ids")`` (written by collectors), ``"episode"``, then
  ``("next", "done")``.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import NestedKey, is_tensor_collection, unravel_key

__all__ = [
    "COLLECTOR_TRAJ_KEY",
    "DEFAULT_END_KEY",
    "DEFAULT_TRAJ_KEY",
    "Candidate",
    "key_candidates",
    "missing_key",
    "read_entry",
    "resolve",
    "storage_keys",
]

COLLECTOR_TRAJ_KEY = ("collector", "traj_ids")
DEFAULT_TRAJ_KEY = "episode"
DEFAULT_END_KEY = ("next", "done")

Candidate = tuple[str, NestedKey]  # (mode, key): mode is "traj" or "end"


def key_candidates(traj_key: NestedKey | None, end_key: NestedKey | None) -> tuple[Candidate, ...]:
    """The ``(mode, key)`` pairs a sampler may read, most preferred first.

    Examples:
        >>> key_candidates("episode", None)
        (('traj', 'episode'), ('end', ('next', 'done')))
        >>> [key for _, key in key_candidates(None, None)]
        [('collector', 'traj_ids'), 'episode', ('next', 'done')]
    """
    auto = (("traj", COLLECTOR_TRAJ_KEY), ("traj", DEFAULT_TRAJ_KEY))
    if traj_key is not None and end_key is not None:
        return (("traj", unravel_key(traj_key)), ("end", unravel_key(end_key)))
    if traj_key is not None:
        return (("traj", unravel_key(traj_key)), ("end", DEFAULT_END_KEY))
    if end_key is not None:
        return (("end", unravel_key(end_key)), *auto)
    return (*auto, ("end", DEFAULT_END_KEY))


def resolve(candidates: tuple[Candidate, ...], keys: Any) -> Candidate | None:
    """The first candidate whose key is in ``keys`` (``None`` when none is)."""
    for mode, key in candidates:
        if key in keys:
            return mode, key
    return None


def storage_keys(storage: Any) -> list[NestedKey] | None:
    """The leaf keys of a storage's data, or ``None`` when they cannot be listed."""
    data = getattr(storage, "_storage", None)
    if not is_tensor_collection(data):
        try:
            data = storage[torch.zeros(1, dtype=torch.long)] if len(storage) else None
        except Exception:  # any storage error means: keys unknown
            data = None
        if isinstance(data, (list, tuple)) and data:
            data = data[0]
    if is_tensor_collection(data):
        return list(data.keys(include_nested=True, leaves_only=True))
    return None


def read_entry(storage: Any, key: NestedKey, rows: torch.Tensor, *, owner: str) -> torch.Tensor:
    """The stored tensor at ``key`` for the cursor-dim ``rows``.

    Raises:
        KeyError: if the storage has no entry ``key`` (the message lists its keys).
    """
    try:
        if hasattr(storage, "_get_entry"):
            return torch.as_tensor(storage._get_entry(key, rows))
        data = storage[rows]
        if isinstance(data, (list, tuple)):
            return torch.stack([torch.as_tensor(item.get(key)) for item in data])
        return torch.as_tensor(data.get(key))
    except KeyError:
        raise missing_key(owner, ((None, key),), storage_keys(storage)) from None


def missing_key(owner: str, candidates: Any, keys: Any) -> KeyError:
    """The error for data that carries none of the ``candidates``' keys."""
    wanted = " or ".join(repr(key) for _, key in candidates)
    return KeyError(
        f"{owner} expected the entry {wanted} (trajectory ids or end signals) in the stored "
        f"data, but it is missing. Available keys: {keys}. Pass traj_key= or end_key= "
        "naming an entry that marks the trajectories."
    )


def key_to_json(key: NestedKey | None) -> Any:
    """A key as JSON (tuples become lists)."""
    return list(key) if isinstance(key, tuple) else key


def key_from_json(key: Any) -> NestedKey | None:
    """Inverse of :func:`key_to_json`."""
    return tuple(key) if isinstance(key, list) else key


def storage_rows(storage: Any) -> int:
    """Size of the storage's cursor dim (its capacity along time)."""
    shape = getattr(storage, "shape", None)
    return int(shape[0]) if shape is not None and len(shape) else int(storage.max_size)
