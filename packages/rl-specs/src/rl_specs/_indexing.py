"""Indexing specs as tensors are indexed: Ellipsis, bound checks and negative slice steps."""

from __future__ import annotations

from typing import Any

import torch


def _normalize_index(index: Any, ndim: int, *, owner: str) -> tuple:
    """Expand ``index`` to a tuple that addresses only the first ``ndim`` dims (no Ellipsis).

    Raises:
        IndexError: if the index covers more than ``ndim`` dims.
    """
    if not isinstance(index, tuple):
        index = (index,)
    if any(i is Ellipsis for i in index):
        pos = next(k for k, i in enumerate(index) if i is Ellipsis)
        consumed = sum(1 for i in index if i is not None and i is not Ellipsis)
        fill = (slice(None),) * max(ndim - consumed, 0)
        index = index[:pos] + fill + tuple(i for i in index[pos + 1 :] if i is not Ellipsis)
    consumed = sum(_dims_consumed(i) for i in index)
    if consumed > ndim:
        raise IndexError(
            f"{owner} has {ndim} indexable dims, got an index over {consumed} dims: {index!r}. "
            "Index only the leading (batch) dims of the spec."
        )
    return index


def _dims_consumed(item: Any) -> int:  # Any: one element of an index
    if item is None:
        return 0
    if isinstance(item, torch.Tensor) and item.dtype is torch.bool:
        return item.ndim
    return 1


def _checked_index(index: Any, shape: torch.Size, *, owner: str) -> tuple[tuple, tuple[int, ...]]:
    """``index`` normalised for ``shape``, checked, and with positive slice steps only.

    A slice with a negative step becomes the positive slice over the same elements, and
    its output dim is listed in the returned ``flips``: ``t[index].flip(flips)`` then
    equals numpy's ``t[original_index]``.

    Raises:
        IndexError: if an integer or an index array is out of bounds, or a dynamic (-1) dim
            gets anything but a full slice.
    """
    idx = list(_normalize_index(index, len(shape), owner=owner))
    reversed_at: list[tuple[int, int]] = []  # (position in idx, dim of the spec)
    dim = 0
    for k, item in enumerate(idx):
        consumed = _dims_consumed(item)
        size = shape[dim] if consumed == 1 else None
        if size == -1 and item != slice(None):
            raise IndexError(
                f"{owner} dim {dim} is dynamic (size -1): only a full slice ':' can index it, "
                f"got {item!r}. Make the dim concrete with spec.expand(...) first."
            )
        if isinstance(item, slice) and item.step is not None and item.step < 0:
            picked = range(size)[item]
            idx[k] = slice(picked[-1], picked[0] + 1, -picked.step) if picked else slice(0, 0)
            reversed_at.append((k, dim))
        elif size is not None and not isinstance(item, slice):
            _check_bounds(item, size, dim, owner=owner)
        dim += consumed
    flips = tuple(_output_dim(idx, shape, k, d) for k, d in reversed_at)
    return tuple(idx), flips


#: size given to one dim of a meta tensor to find where indexing puts it
_PROBE = 1_000_033


def _output_dim(idx: list, shape: torch.Size, k: int, dim: int) -> int:
    """The dim of ``t[idx]`` that the slice ``idx[k]`` (over ``dim`` of ``t``) becomes.

    Index arrays and integers move dims around as torch's rules say; a meta tensor whose
    ``dim`` has a recognisable size (and a full slice) tells where it lands, without data.
    """
    probe = [1 if s == -1 else s for s in shape]
    probe[dim] = _PROBE
    items = list(idx)
    items[k] = slice(None)
    return list(torch.empty(probe, device="meta")[tuple(items)].shape).index(_PROBE)


def _check_bounds(item: Any, size: int, dim: int, *, owner: str) -> None:  # Any: int or array
    if type(item) is int:  # the common case, without building a tensor
        if not -size <= item < size:
            _out_of_bounds(item, size, dim, owner=owner)
        return
    if isinstance(item, str):
        raise TypeError(
            f"{owner} is indexed like a tensor (ints, slices, index arrays), got the key "
            f"{item!r}. Keys index Composite specs, which hold the leaf specs."
        )
    values = torch.as_tensor(item)
    if values.dtype is torch.bool or not values.numel():
        return
    if values.is_floating_point() or values.is_complex():
        raise IndexError(
            f"{owner} got an index of dtype {values.dtype}; indices are integers or booleans. "
            "Cast the index with index.long()."
        )
    low, high = int(values.min()), int(values.max())
    if low < -size or high >= size:
        _out_of_bounds(low if low < -size else high, size, dim, owner=owner)


def _out_of_bounds(index: int, size: int, dim: int, *, owner: str) -> None:
    raise IndexError(
        f"{owner} got index {index} for dim {dim} of size {size}. Use indices in "
        f"[{-size}, {size - 1}]."
    )
