"""Unbounded specs: :class:`Unbounded` and its continuous and discrete variants."""

from __future__ import annotations

from typing import Any

import torch

from ._base import DeviceLike, ShapeLike, TensorSpec, _as_dtype
from ._spaces import ContinuousBox

_DEFAULT_SHAPE = torch.Size((1,))


def _is_discrete_dtype(dtype: torch.dtype) -> bool:
    return not (dtype.is_floating_point or dtype.is_complex)


def _pick_variant(dtype: Any, domain: str | None, *, continuous: type, discrete: type) -> type:
    """The continuous or discrete class for a ``dtype``/``domain`` pair (used by ``__new__``)."""
    if domain is not None:
        if domain not in ("continuous", "discrete"):
            raise ValueError(
                f"Expected domain to be 'continuous' or 'discrete', got {domain!r}. "
                "Pass one of them or leave it out to infer it from the dtype."
            )
        return discrete if domain == "discrete" else continuous
    if dtype is None:
        return continuous
    dtype = _as_dtype(dtype, torch.float32, owner=continuous.__name__)
    return discrete if _is_discrete_dtype(dtype) else continuous


def _dtype_range(dtype: torch.dtype) -> tuple[float, float]:
    if dtype is torch.bool:
        return 0, 1
    if _is_discrete_dtype(dtype):
        info = torch.iinfo(dtype)
        return info.min, info.max
    return float("-inf"), float("inf")


class Unbounded(TensorSpec):
    """An unbounded tensor spec.

    Building an ``Unbounded`` gives an :class:`UnboundedContinuous` for floating dtypes
    (the default) and an :class:`UnboundedDiscrete` for integer or boolean dtypes, or as
    ``domain=`` says.

    Args:
        shape (torch.Size or int, optional): the shape. Defaults to ``torch.Size([1])``.
        device (torch.device, optional): the device. Defaults to ``None`` (torch's default device).
        dtype (torch.dtype, optional): the dtype. Defaults to ``torch.get_default_dtype()``
            for continuous specs and ``torch.int64`` for discrete ones.

    Keyword Args:
        domain (str, optional): ``"continuous"`` or ``"discrete"``. Defaults to ``None``
            (inferred from ``dtype``).

    Raises:
        ValueError: if ``domain`` is neither ``"continuous"`` nor ``"discrete"``.

    Examples:
        >>> import torch
        >>> spec = Unbounded((1,), dtype=torch.float)
        >>> type(spec).__name__, spec.shape, spec.rand().dtype
        ('UnboundedContinuous', torch.Size([1]), torch.float32)
        >>> type(Unbounded(shape=(2,), dtype=torch.int64)).__name__
        'UnboundedDiscrete'
        >>> Unbounded(shape=(3, -1, 2)).is_dynamic
        True
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Unbounded:  # Any: __init__'s
        if cls is Unbounded:
            dtype = kwargs.get("dtype", args[2] if len(args) > 2 else None)
            cls = _pick_variant(
                dtype,
                kwargs.get("domain"),
                continuous=UnboundedContinuous,
                discrete=UnboundedDiscrete,
            )
        return super().__new__(cls)

    def __init__(
        self,
        shape: ShapeLike = _DEFAULT_SHAPE,
        device: DeviceLike = None,
        dtype: torch.dtype | str | None = None,
        *,
        domain: str | None = None,
    ) -> None:
        discrete = isinstance(self, UnboundedDiscrete)
        default = torch.int64 if discrete else torch.get_default_dtype()
        dtype = _as_dtype(dtype, default, owner=type(self).__name__)
        low, high = _dtype_range(dtype)
        super().__init__(
            shape,
            ContinuousBox(low, high),
            device,
            dtype,
            "discrete" if discrete else "continuous",
        )

    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        full = self._full_shape(shape, "rand")
        if self.dtype.is_floating_point or self.dtype.is_complex:
            return torch.randn(full, dtype=self.dtype, device=self.device)
        if self.dtype is torch.bool:
            return torch.randint(0, 2, full, device=self.device).bool()
        return torch.randint(
            self.space.low, self.space.high, full, dtype=self.dtype, device=self.device
        )

    def is_in(self, val: torch.Tensor) -> bool:
        return self._basic_match(val)

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        return val.to(self.dtype)

    def _rebuild(
        self, shape: torch.Size, attrs: dict[str, torch.Tensor], **overrides: Any
    ) -> TensorSpec:
        return Unbounded(
            shape=shape,
            device=overrides.get("device", self.device),
            dtype=overrides.get("dtype", self.dtype),
        )


class UnboundedContinuous(Unbounded):
    """A specialized version of :class:`Unbounded` with continuous space.

    Examples:
        >>> spec = UnboundedContinuous(shape=(2,))
        >>> spec.domain, spec.dtype, spec.is_in(spec.rand())
        ('continuous', torch.float32, True)
    """


class UnboundedDiscrete(Unbounded):
    """A specialized version of :class:`Unbounded` with discrete space.

    Examples:
        >>> spec = UnboundedDiscrete(shape=(2,))
        >>> spec.domain, spec.dtype, spec.is_in(spec.rand())
        ('discrete', torch.int64, True)
    """
