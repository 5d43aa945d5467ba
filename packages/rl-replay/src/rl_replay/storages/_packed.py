"""Row-interleaved allocation of a tensor storage's leaves.

Sampling gathers random rows from every leaf. With one tensor per leaf, a row of a
TED transition (observation, action, reward, three flags and their ``"next"``
twins) lies in ten places, hundreds of megabytes apart: ten cache misses (and TLB
misses) per sampled row. Leaves of one dtype are therefore cut as column views out of
one buffer of shape ``[*batch, sum of leaf sizes]``, so a row of all of them is a few
adjacent cache lines. Each leaf is still its own tensor of its own shape (a strided
view), gathers still return contiguous tensors, and writes land in the views.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

__all__ = ["packed_leaves"]

LeafSpec = tuple[torch.Size, torch.dtype]  # (batch + trailing shape, dtype)


def packed_leaves(
    specs: dict[object, LeafSpec],
    batch: torch.Size,
    allocate: Callable[[torch.Size, torch.dtype], torch.Tensor],
) -> dict[object, torch.Tensor]:
    """One buffer per dtype, each leaf a column view of it; keys keep their order.

    Args:
        specs: ``{key: (shape, dtype)}``; every shape starts with ``batch``.
        batch: the storage batch shape.
        allocate: makes an uninitialised tensor of a shape and dtype.

    Examples:
        >>> import torch
        >>> specs = {"a": (torch.Size([4, 3]), torch.float), "b": (torch.Size([4]), torch.float)}
        >>> leaves = packed_leaves(specs, torch.Size([4]), lambda s, d: torch.empty(s, dtype=d))
        >>> leaves["a"].shape, leaves["b"].shape, leaves["a"].stride()
        (torch.Size([4, 3]), torch.Size([4]), (4, 1))
        >>> leaves["a"].untyped_storage().data_ptr() == leaves["b"].untyped_storage().data_ptr()
        True
    """
    groups: dict[torch.dtype, list[object]] = {}
    for key, (shape, dtype) in specs.items():
        if math.prod(shape[len(batch) :]) > 0:  # empty leaves get their own (empty) tensor
            groups.setdefault(dtype, []).append(key)
    out = {}
    for dtype, keys in groups.items():
        widths = [math.prod(specs[key][0][len(batch) :]) for key in keys]
        buffer = allocate(torch.Size([*batch, sum(widths)]), dtype)
        start = 0
        for key, width in zip(keys, widths, strict=True):
            column, tail = buffer[..., start : start + width], specs[key][0][len(batch) :]
            out[key] = column.unflatten(-1, tail) if tail else column.squeeze(-1)
            start += width
    return {
        key: out[key] if key in out else allocate(shape, dtype)
        for key, (shape, dtype) in specs.items()
    }
