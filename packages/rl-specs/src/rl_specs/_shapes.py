"""Shape arithmetic shared by the specs: dynamic (``-1``) dims, meta-tensor shapes, dims."""

from __future__ import annotations

from collections.abc import Callable

import torch

#: Size stored in place of a dynamic (``-1``) dim when shapes are computed on meta tensors.
_DYN_PLACEHOLDER = 1_000_003


def _dynamic_dims(shape: torch.Size) -> list[int]:
    return [i for i, d in enumerate(shape) if d == -1]


def _drawn_shape(shape: torch.Size) -> torch.Size:
    """The shape data is built with: each dynamic (``-1``) dim drawn at size 1, as TorchRL does."""
    return torch.Size(1 if d == -1 else d for d in shape)


def _to_meta_shape(shape: torch.Size) -> torch.Size:
    return torch.Size(_DYN_PLACEHOLDER if d == -1 else d for d in shape)


def _from_meta_shape(shape: torch.Size) -> torch.Size:
    return torch.Size(-1 if d == _DYN_PLACEHOLDER else d for d in shape)


def _shape_after(shape: torch.Size, op: Callable[[torch.Tensor], torch.Tensor]) -> torch.Size:
    """Shape that ``op`` gives a tensor of ``shape``, computed on a meta tensor (no data)."""
    return _from_meta_shape(op(torch.empty(_to_meta_shape(shape), device="meta")).shape)


def _shape_matches(val_shape: torch.Size, spec_shape: torch.Size) -> bool:
    """Whether ``val_shape`` ends with ``spec_shape`` (``-1`` dims of the spec match any size)."""
    if val_shape == spec_shape:
        return True
    n = len(spec_shape)
    if len(val_shape) < n:
        return False
    tail = val_shape[len(val_shape) - n :]
    return all(s == -1 or s == v for s, v in zip(spec_shape, tail, strict=True))


def _pos_dim(dim: int, ndim: int, *, owner: str) -> int:
    if not -ndim <= dim < ndim:
        raise IndexError(
            f"{owner} expected dim in [{-ndim}, {ndim - 1}], got dim={dim}. Pick an existing dim."
        )
    return dim % ndim
