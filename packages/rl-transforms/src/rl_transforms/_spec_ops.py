"""Applying a tensor operation (reshape, permute, resize, ...) to a leaf spec."""

from __future__ import annotations

from collections.abc import Callable

import torch

from rl_specs import Binary, Bounded, Categorical, TensorSpec, Unbounded

TensorOp = Callable[[torch.Tensor], torch.Tensor]


def map_spec(spec: TensorSpec, fn: TensorOp, *, dtype: torch.dtype | None = None) -> TensorSpec:
    """The spec of ``fn(x)`` for ``x`` in ``spec``.

    Bounds of a :class:`Bounded` spec go through ``fn`` (then cast to ``dtype``);
    categorical specs keep their number of categories; anything else becomes an
    :class:`Unbounded` spec of the new shape.
    """
    dtype = dtype if dtype is not None else spec.dtype
    if isinstance(spec, Bounded):
        low = fn(spec.low.to(dtype) if dtype.is_floating_point else spec.low)
        high = fn(spec.high.to(dtype) if dtype.is_floating_point else spec.high)
        return Bounded(low=low.to(dtype), high=high.to(dtype), dtype=dtype, device=spec.device)
    probe = torch.zeros(tuple(spec.shape), dtype=spec.dtype, device="meta")
    shape = fn(probe).shape
    if isinstance(spec, Binary):
        return Binary(
            n=shape[-1] if len(shape) else 1, shape=shape, dtype=dtype, device=spec.device
        )
    if isinstance(spec, Categorical) and type(spec) is Categorical:
        return Categorical(spec.n, shape=shape, dtype=dtype, device=spec.device)
    return Unbounded(shape=shape, dtype=dtype, device=spec.device)
