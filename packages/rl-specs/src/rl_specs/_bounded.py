"""Bounded specs: :class:`Bounded` and its continuous and discrete variants."""

from __future__ import annotations

from typing import Any

import torch

from ._base import DeviceLike, ShapeLike, TensorSpec, _as_device, _as_dtype, _as_shape
from ._spaces import ContinuousBox
from ._unbounded import _pick_variant


def _bound_tensor(
    value: Any,  # Any: a number, a sequence, a numpy array or a tensor
    name: str,
    *,
    dtype: torch.dtype,
    device: torch.device | None,
) -> torch.Tensor:
    if value is None:
        raise TypeError(
            f"Bounded expected {name} to be a number or a tensor, got None. "
            f"Pass e.g. {name}={-1.0 if name == 'low' else 1.0}."
        )
    return torch.as_tensor(value, device=device).to(dtype)


def _broadcast_bounds(
    low: torch.Tensor, high: torch.Tensor, shape: torch.Size | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Size]:
    if shape is None:
        if low.ndim == 0 and high.ndim == 0:
            raise ValueError(
                "Bounded could not infer its shape: low and high are scalars and shape was not "
                "given. Pass shape=..., e.g. Bounded(low=-1, high=1, shape=(2,))."
            )
        try:
            shape = torch.broadcast_shapes(low.shape, high.shape)
        except RuntimeError as err:
            raise ValueError(
                f"Bounded expected low and high of broadcastable shapes, got {tuple(low.shape)} "
                f"and {tuple(high.shape)}. Give them the same shape."
            ) from err
    # dynamic (-1) dims are stored as size-1 dims that broadcast against any size
    storage = torch.Size(1 if d == -1 else d for d in shape)
    try:
        low = low.expand(storage).clone()
        high = high.expand(storage).clone()
    except RuntimeError as err:
        raise ValueError(
            f"Bounded expected low and high to broadcast to shape {tuple(shape)}, got shapes "
            f"{tuple(low.shape)} and {tuple(high.shape)}. Match the bounds to the shape."
        ) from err
    return low, high, shape


class Bounded(TensorSpec):
    """A bounded tensor spec: every element lies in ``[low, high]``.

    Building a ``Bounded`` gives a :class:`BoundedContinuous` for floating dtypes (the
    default) and a :class:`BoundedDiscrete` for integer dtypes, or as ``domain=`` says.

    Args:
        low (float or torch.Tensor): the lower bound (broadcast to ``shape``).
        high (float or torch.Tensor): the upper bound (broadcast to ``shape``).
        shape (torch.Size, optional): the shape. Defaults to the broadcast shape of
            ``low`` and ``high``, which must then be tensors.
        device (torch.device, optional): the device. Defaults to ``None`` (torch's default device).
        dtype (torch.dtype, optional): the dtype. Defaults to ``torch.get_default_dtype()``,
            or ``torch.int64`` when ``domain="discrete"``.
        domain (str, optional): ``"continuous"`` or ``"discrete"``. Defaults to ``None``
            (inferred from ``dtype``).

    Raises:
        ValueError: if some ``low`` exceeds ``high``, if the bounds do not broadcast to
            ``shape``, or if the shape cannot be inferred.

    Examples:
        >>> import torch
        >>> spec = Bounded(low=-1, high=1, shape=(2,))
        >>> type(spec).__name__, spec.low, spec.high
        ('BoundedContinuous', tensor([-1., -1.]), tensor([1., 1.]))
        >>> spec.project(torch.tensor([3.0, -0.5]))
        tensor([ 1.0000, -0.5000])
        >>> discrete = Bounded(0, 5, shape=(), dtype=torch.long)
        >>> type(discrete).__name__, discrete.is_in(torch.tensor(5))
        ('BoundedDiscrete', True)
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Bounded:  # Any: __init__'s
        if cls is Bounded:
            dtype = kwargs.get("dtype", args[4] if len(args) > 4 else None)
            domain = kwargs.get("domain", args[5] if len(args) > 5 else None)
            cls = _pick_variant(
                dtype, domain, continuous=BoundedContinuous, discrete=BoundedDiscrete
            )
        return super().__new__(cls)

    def __init__(
        self,
        low: float | torch.Tensor | None = None,
        high: float | torch.Tensor | None = None,
        shape: ShapeLike | None = None,
        device: DeviceLike = None,
        dtype: torch.dtype | str | None = None,
        domain: str | None = None,
    ) -> None:
        discrete = isinstance(self, BoundedDiscrete)
        default = torch.int64 if discrete else torch.get_default_dtype()
        dtype = _as_dtype(dtype, default, owner=type(self).__name__)
        device = _as_device(device)
        low_t = _bound_tensor(low, "low", dtype=dtype, device=device)
        high_t = _bound_tensor(high, "high", dtype=dtype, device=device)
        shape = None if shape is None else _as_shape(shape, owner=type(self).__name__)
        low_t, high_t, shape = _broadcast_bounds(low_t, high_t, shape)
        bad = low_t > high_t
        if bad.any():
            raise ValueError(
                f"{type(self).__name__} expected low <= high everywhere, got low={low_t[bad]} "
                f"and high={high_t[bad]} where it fails. Swap or fix the bounds."
            )
        super().__init__(
            shape,
            ContinuousBox(low_t, high_t),
            device,
            dtype,
            "discrete" if discrete else "continuous",
        )
        self._finite = bool(torch.isfinite(low_t).all() and torch.isfinite(high_t).all())
        floating = dtype.is_floating_point or dtype.is_complex
        self._span = high_t - low_t if self._finite and floating else None

    @property
    def low(self) -> torch.Tensor:
        """The lower bound, one value per element."""
        return self.space.low

    @property
    def high(self) -> torch.Tensor:
        """The upper bound, one value per element."""
        return self.space.high

    def _tensor_attrs(self) -> dict[str, torch.Tensor]:
        return {"low": self.space.low, "high": self.space.high}

    def _rebuild(
        self, shape: torch.Size, attrs: dict[str, torch.Tensor], **overrides: Any
    ) -> TensorSpec:
        cls, domain = (Bounded, None) if "dtype" in overrides else (type(self), self.domain)
        return cls(
            low=attrs["low"],
            high=attrs["high"],
            shape=shape,
            device=overrides.get("device", self.device),
            dtype=overrides.get("dtype", self.dtype),
            domain=domain,
        )

    def is_in(self, val: torch.Tensor) -> bool:
        if not self._basic_match(val):
            return False
        return bool(((val >= self.space.low) & (val <= self.space.high)).all())

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        if not self.dtype.is_floating_point and val.is_floating_point():
            val = val.round()
        val = val.to(self.dtype)
        if self.dtype is torch.bool:  # torch.clamp has no bool kernel: False < True
            return (val | self.space.low) & self.space.high
        return torch.clamp(val, self.space.low, self.space.high)


class BoundedContinuous(Bounded):
    """A bounded spec over a continuous domain (floating dtypes).

    Examples:
        >>> spec = BoundedContinuous(low=0.0, high=2.0, shape=(3,))
        >>> sample = spec.rand((5,))
        >>> sample.shape, bool(((sample >= 0) & (sample <= 2)).all())
        (torch.Size([5, 3]), True)
    """

    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        full = self._full_shape(shape, "rand")
        low, high = self.space.low, self.space.high
        if self._finite:
            return torch.rand(full, dtype=self.dtype, device=self.device).mul_(self._span).add_(low)
        # infinite bounds: normal where both are infinite, shifted exponential on half-lines
        out = torch.randn(full, dtype=self.dtype, device=self.device)
        expo = torch.empty_like(out).exponential_()
        unif = torch.rand_like(out)
        low_ok, high_ok = torch.isfinite(low), torch.isfinite(high)
        span = torch.where(low_ok & high_ok, high - low, torch.zeros_like(low))
        out = torch.where(low_ok & high_ok, low + unif * span, out)
        out = torch.where(low_ok & ~high_ok, low + expo, out)
        return torch.where(~low_ok & high_ok, high - expo, out)


class BoundedDiscrete(Bounded):
    """A bounded spec over integers: every element is an integer in ``[low, high]``.

    Examples:
        >>> import torch
        >>> spec = BoundedDiscrete(low=0, high=3, shape=(4,))
        >>> spec.dtype, spec.domain, spec.is_in(spec.rand())
        (torch.int64, 'discrete', True)
    """

    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        full = self._full_shape(shape, "rand")
        low, high = self.space.low.double(), self.space.high.double()
        draw = torch.rand(full, dtype=torch.float64, device=self.device)
        out = (draw * (high - low + 1)).floor_().add_(low)
        return torch.minimum(out, high).to(self.dtype)
