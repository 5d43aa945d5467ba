"""The :class:`Binary` spec: ``n`` independent 0/1 values along the last dim."""

from __future__ import annotations

from typing import Any

import torch

from ._base import DeviceLike, ShapeLike, TensorSpec, _as_device, _as_dtype, _as_shape
from ._categorical import Categorical
from ._shapes import _pos_dim
from ._spaces import BinaryBox


class Binary(Categorical):
    """A binary discrete tensor spec: every element is 0 or 1; the last dim has size ``n``.

    Args:
        n (int, optional): the size of the last dim. Defaults to ``shape[-1]``.
        shape (torch.Size, optional): the shape. Defaults to ``(n,)``.
        device (torch.device, optional): the device. Defaults to ``None`` (torch's default device).
        dtype (torch.dtype, optional): the dtype. Defaults to ``torch.int8``.

    Raises:
        TypeError: if neither ``n`` nor ``shape`` is given.
        ValueError: if ``shape[-1] != n``.

    Examples:
        >>> import torch
        >>> spec = Binary(1, shape=(1,), dtype=torch.bool)
        >>> spec.n, spec.zero(), spec.is_in(torch.tensor([True]))
        (1, tensor([False]), True)
        >>> Binary(n=4).rand().dtype, Binary(n=4).cardinality()
        (torch.int8, 16)
    """

    @property
    def _event_ndim(self) -> int:  # the last dim holds the n flags (none for shape ())
        return 1 if self.shape else 0

    def __init__(
        self,
        n: int | None = None,
        shape: ShapeLike | None = None,
        device: DeviceLike = None,
        dtype: torch.dtype | str = torch.int8,
    ) -> None:
        owner = type(self).__name__
        if shape is None:
            if n is None:
                raise TypeError(
                    "Binary expected n or shape, got neither. Pass e.g. Binary(n=3) or "
                    "Binary(shape=(2, 3))."
                )
            shape = torch.Size((n,))
        shape = _as_shape(shape, owner=owner)
        last = shape[-1] if shape else 0  # shape () is one flag: n is 0 then
        if n is None:
            n = last
        if n != last:
            raise ValueError(
                f"Binary expected n to be the size of the last dim, {last}, got n={n} and "
                f"shape={tuple(shape)}. Pass shape=(*batch, {n})."
            )
        TensorSpec.__init__(
            self,
            shape,
            BinaryBox(n),
            _as_device(device),
            _as_dtype(dtype, torch.int8, owner=owner),
            "discrete",
        )
        self._num_values = 2
        self.mask = None

    def cardinality(self) -> int:
        return 2 ** (self.space.n if self.shape else 1)

    def unsqueeze(self, dim: int) -> Binary:
        """Insert a size-1 dim at ``dim``; at the end, it becomes a last dim of ``n=1`` flag.

        Examples:
            >>> Binary(3).unsqueeze(-1).shape, Binary(3).unsqueeze(-1).n
            (torch.Size([3, 1]), 1)
        """
        pos = _pos_dim(dim, self.ndim + 1, owner="Binary.unsqueeze")
        return self._rebuild(self.shape[:pos] + torch.Size([1]) + self.shape[pos:], {})

    def squeeze(self, dim: int | None = None) -> Binary:
        """Remove the size-1 dim ``dim`` (every size-1 dim when ``None``), the last one too."""
        if dim is None:
            return self._rebuild(torch.Size(d for d in self.shape if d != 1), {})
        pos = _pos_dim(dim, self.ndim, owner="Binary.squeeze")
        if self.shape[pos] != 1:
            return self.clone()
        return self._rebuild(self.shape[:pos] + self.shape[pos + 1 :], {})

    def update_mask(self, mask: torch.Tensor | None) -> None:
        """Binary specs take no mask.

        Raises:
            TypeError: always unless ``mask`` is ``None``.
        """
        if mask is not None:
            raise TypeError(
                "Binary specs take no mask; got one. Use a Categorical or OneHot spec to "
                "restrict the allowed values."
            )

    def _rebuild(
        self, shape: torch.Size, attrs: dict[str, torch.Tensor], **overrides: Any
    ) -> TensorSpec:
        return type(self)(
            shape=shape,
            device=overrides.get("device", self.device),
            dtype=overrides.get("dtype", self.dtype),
        )

    def is_in(self, val: torch.Tensor) -> bool:
        if not self._basic_match(val):
            return False
        return self.dtype is torch.bool or bool(((val == 0) | (val == 1)).all())

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        return (val > 0.5).to(self.dtype) if val.is_floating_point() else (val != 0).to(self.dtype)

    def enumerate(self, use_mask: bool = False) -> torch.Tensor:
        """All the ``2 ** n`` values of the last dim, stacked along a new first dim."""
        if not self.shape:
            return torch.tensor([0, 1], device=self.device, dtype=self.dtype)
        n = self.space.n
        bits = (torch.arange(2**n).unsqueeze(-1) >> torch.arange(n - 1, -1, -1)) & 1
        bits = bits.to(self.device, self.dtype)
        return bits.reshape(-1, *(1,) * (self.ndim - 1), n).expand(-1, *self.shape)
