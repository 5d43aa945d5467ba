"""Which sub-envs of a batched env an index or a ``"_step"``/``"_reset"`` mask selects."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import NestedKey, TensorDictBase


def normalize_index(item: Any, n: int) -> list[int]:  # Any: int, slice, array, tensor
    """The sub-env indices ``item`` selects among ``n`` (in the order it gives them).

    Raises:
        NotImplementedError: ``item`` is a boolean mask.
        IndexError: an index is out of range, the selection is empty or not 1-D.
    """
    if isinstance(item, bool):
        raise NotImplementedError(
            f"Boolean masks are not supported to index a batched env, got {item!r}. Pass "
            f"an int, a slice or a list of indices, e.g. env[mask.nonzero().squeeze(-1)]."
        )
    if isinstance(item, int):
        if not -n <= item < n:
            raise IndexError(f"index {item} is out of range for a batched env of {n} envs.")
        return [item % n]
    if isinstance(item, slice):
        indices = list(range(n))[item]
    else:
        index = torch.as_tensor(item)
        if index.dtype == torch.bool:
            raise NotImplementedError(
                "Boolean masks are not supported to index a batched env. Pass the "
                "indices instead, e.g. env[mask.nonzero().squeeze(-1)]."
            )
        if index.is_floating_point() or index.is_complex() or index.ndim > 1:
            raise IndexError(
                f"A batched env is indexed by an int, a slice or a 1-D sequence of ints, got "
                f"{item!r}."
            )
        if index.ndim == 0:
            return normalize_index(int(index), n)
        indices = []
        for i in index.tolist():
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of range for a batched env of {n} envs.")
            indices.append(i % n)
    if not indices:
        raise IndexError(f"The index {item!r} selects no env; a batched env view needs one.")
    return indices


def active_envs(mask: torch.Tensor | None, n: int) -> list[int] | None:
    """The sub-envs a ``"_step"``/``"_reset"`` mask selects (``None``: no mask, all)."""
    if mask is None:
        return None
    flags = mask.reshape(n, -1).any(-1).tolist()
    return [i for i, f in enumerate(flags) if f]


def reset_targets(
    tensordict: TensorDictBase | None, reset_keys: Sequence[NestedKey], n: int
) -> tuple[list[NestedKey], list[int] | None]:
    """The ``"_reset"`` keys present and the sub-envs to reset (``None``: all).

    A root ``"_reset"`` decides alone; otherwise a sub-env is reset when any
    nested mask selects one of its elements.
    """
    if tensordict is None:
        return [], None
    found = [k for k in reset_keys if tensordict.get(k, None) is not None]
    if "_reset" in found:
        return found, active_envs(tensordict.get("_reset"), n)
    if not found:
        return found, None
    flags = torch.zeros(n, dtype=torch.bool)
    for key in found:
        flags |= tensordict.get(key).reshape(n, -1).any(-1).cpu()
    return found, flags.nonzero().squeeze(-1).tolist()
