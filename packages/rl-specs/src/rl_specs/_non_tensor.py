"""The :class:`NonTensor` spec: entries that hold python objects (strings, dicts, ...)."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import NonTensorData, NonTensorStack, is_non_tensor

from ._base import DeviceLike, ShapeLike, TensorSpec
from ._errors import _NotInSpecError
from ._shapes import _shape_matches
from ._spaces import NonTensorBox

_DEFAULT_SHAPE = torch.Size((1,))


class NonTensor(TensorSpec):
    """A spec for non-tensor data: values are ``NonTensorData`` of the spec's shape.

    Args:
        shape (torch.Size, optional): the batch shape of the data. Defaults to
            ``torch.Size([1])``.
        device (torch.device, optional): the device. Defaults to ``None``.
        dtype (torch.dtype, optional): unused by the data, kept for symmetry. Defaults to
            ``None``.

    Keyword Args:
        example_data (Any, optional): the object that :meth:`rand`, :meth:`zero` and
            :meth:`one` return, wrapped. Defaults to ``None``.
        batched (bool, optional): whether the data is batched along the spec's shape
            (recorded and compared; generated data always shares ``example_data``).
            Defaults to ``False``.

    Examples:
        >>> spec = NonTensor(shape=(), example_data="a prompt")
        >>> data = spec.rand()
        >>> data.data, spec.is_in(data)
        ('a prompt', True)
        >>> spec.zero((2,)).batch_size
        torch.Size([2])
    """

    def __init__(
        self,
        shape: ShapeLike = _DEFAULT_SHAPE,
        device: DeviceLike = None,
        dtype: torch.dtype | None = None,
        *,
        example_data: Any = None,  # Any: any python object
        batched: bool = False,
    ) -> None:
        super().__init__(shape, NonTensorBox(), device, dtype, "")
        self.example_data = example_data
        self.batched = batched

    def _rebuild(
        self, shape: torch.Size, attrs: dict[str, torch.Tensor], **overrides: Any
    ) -> TensorSpec:
        return type(self)(
            shape=shape,
            device=overrides.get("device", self.device),
            dtype=overrides.get("dtype", self.dtype),
            example_data=self.example_data,
            batched=self.batched,
        )

    def _data(self, shape: ShapeLike | None, what: str) -> NonTensorData:
        full = self._full_shape(shape, what)
        return NonTensorData(self.example_data, batch_size=full, device=self.device)

    def rand(self, shape: ShapeLike | None = None) -> NonTensorData:
        return self._data(shape, "rand")

    def zero(self, shape: ShapeLike | None = None) -> NonTensorData:
        return self._data(shape, "zero")

    def one(self, shape: ShapeLike | None = None) -> NonTensorData:
        return self._data(shape, "one")

    def is_in(self, val: Any) -> bool:  # Any: any non-tensor container
        return is_non_tensor(val) and _shape_matches(val.batch_size, self.shape)

    def assert_is_in(self, value: Any) -> None:  # Any: any non-tensor container
        if not self.is_in(value):
            raise _NotInSpecError(
                f"NonTensor expected NonTensorData whose batch size ends with "
                f"{tuple(self.shape)}, got {type(value).__name__}. Wrap the value with "
                "spec.encode(value)."
            )

    def _project(self, val: Any) -> Any:  # Any: any python object
        return self.encode(val)

    def encode(self, val: Any, *, ignore_device: bool = False) -> NonTensorData:
        if is_non_tensor(val):
            return val
        device = None if ignore_device else self.device
        return NonTensorData(val, batch_size=self.shape, device=device)

    def to_numpy(self, val: Any, safe: bool | None = None) -> Any:
        """Return the wrapped python object(s)."""
        if safe:
            self.assert_is_in(val)
        return val.tolist() if isinstance(val, NonTensorStack) else val.data

    def _extra_eq(self, other: TensorSpec) -> bool:
        return self.batched == other.batched
