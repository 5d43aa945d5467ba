"""Categorical specs: :class:`Categorical` (integers ``0..n-1``) and :class:`MultiCategorical`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from ._base import DeviceLike, ShapeLike, TensorSpec, _as_device, _as_dtype, _as_shape
from ._masks import (
    _check_mask,
    _check_n,
    _mask_allows,
    _MaskedCategories,
    _no_category,
    _project_masked,
    _sample_masked,
)
from ._spaces import BoxList, CategoricalBox

if TYPE_CHECKING:
    from ._one_hot import MultiOneHot, OneHot

#: The one-hot spec classes, registered by ``_one_hot`` when it is imported (it imports
#: this module for its own conversions, so this one cannot import it back):
#: ``"single"`` -> ``OneHot``, ``"multi"`` -> ``MultiOneHot``.
ONE_HOT_CLASSES: dict[str, type[TensorSpec]] = {}


class Categorical(_MaskedCategories, TensorSpec):
    """A discrete tensor spec: integers in ``[0, n)``, optionally restricted by a mask.

    Args:
        n (int): the number of categories.
        shape (torch.Size, optional): the shape. Defaults to ``torch.Size([])``.
        device (torch.device, optional): the device. Defaults to ``None`` (torch's default device).
        dtype (torch.dtype, optional): the dtype. Defaults to ``torch.long``.
        mask (torch.Tensor, optional): booleans of shape ``(*shape, n)``; ``False`` forbids
            a category. Defaults to ``None`` (every category allowed).

    Raises:
        TypeError: if ``n`` is not an int or ``mask`` is not boolean.
        ValueError: if ``n <= 0`` or ``mask`` does not broadcast to ``(*shape, n)``.

    Examples:
        >>> import torch
        >>> spec = Categorical(n=4, shape=(2,))
        >>> spec.n, spec.shape, spec.dtype
        (4, torch.Size([2]), torch.int64)
        >>> spec.is_in(torch.tensor([0, 3])), spec.is_in(torch.tensor([0, 4]))
        (True, False)
        >>> spec.update_mask(torch.tensor([False, False, True, False]))
        >>> spec.rand()
        tensor([2, 2])
        >>> spec.to_one_hot(torch.tensor([1, 2]))
        tensor([[False,  True, False, False],
                [False, False,  True, False]])
        >>> done = Categorical(n=2, shape=torch.Size((1,)), dtype=torch.bool)
        >>> done.zero()
        tensor([False])
    """

    def __init__(
        self,
        n: int,
        shape: ShapeLike | None = None,
        device: DeviceLike = None,
        dtype: torch.dtype | str = torch.long,
        mask: torch.Tensor | None = None,
    ) -> None:
        owner = type(self).__name__
        n = _check_n(n, owner=owner)
        device = _as_device(device)
        shape = _as_shape(shape, owner=owner)
        super().__init__(
            shape, CategoricalBox(n), device, _as_dtype(dtype, torch.long, owner=owner), "discrete"
        )
        self._num_values = n
        self.mask = _check_mask(mask, torch.Size((*shape, n)), device, owner=owner)

    def _mask_shape(self) -> torch.Size:
        return torch.Size((*self.shape, self._num_values))

    def _rebuild(
        self, shape: torch.Size, attrs: dict[str, torch.Tensor], **overrides: Any
    ) -> TensorSpec:
        return type(self)(
            n=self.space.n,
            shape=shape,
            device=overrides.get("device", self.device),
            dtype=overrides.get("dtype", self.dtype),
            mask=attrs.get("mask"),
        )

    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        full = self._full_shape(shape, "rand")
        if not self._num_values:
            raise _no_category(type(self).__name__, self._num_values)
        if self.mask is None:
            out = torch.randint(0, self._num_values, full, device=self.device)
        else:
            out = _sample_masked(self.mask, full[: len(full) - self.ndim])
        return out if self.dtype is torch.int64 else out.to(self.dtype)

    def is_in(self, val: torch.Tensor) -> bool:
        if not self._basic_match(val):
            return False
        if self.dtype is not torch.bool and not bool(((val >= 0) & (val < self._num_values)).all()):
            return False
        return self.mask is None or _mask_allows(self.mask, val)

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        if val.is_floating_point():
            val = val.round()
        val = val.clamp(0, self._num_values - 1).to(self.dtype)
        return val if self.mask is None else _project_masked(val, self.mask)

    def index(self, index: torch.Tensor, tensor_to_index: torch.Tensor) -> torch.Tensor:
        """Pick ``tensor_to_index[..., index]`` along the last dim (e.g. a chosen Q-value).

        Examples:
            >>> import torch
            >>> Categorical(3).index(torch.tensor(2), torch.tensor([0.1, 0.2, 0.3]))
            tensor(0.3000)
        """
        idx = index.long().expand(tensor_to_index.shape[:-1]).unsqueeze(-1)
        return tensor_to_index.gather(-1, idx).squeeze(-1)

    def to_one_hot(self, val: torch.Tensor, safe: bool | None = None) -> torch.Tensor:
        """Encode categorical values as one-hot booleans (a new last dim of size ``n``)."""
        if safe:
            self.assert_is_in(val)
        return torch.nn.functional.one_hot(val.long(), self._num_values).bool()

    def to_one_hot_spec(self) -> OneHot:
        """The :class:`OneHot` spec of :meth:`to_one_hot`'s outputs."""
        return ONE_HOT_CLASSES["single"](
            n=self._num_values,
            shape=(*self.shape, self._num_values),
            device=self.device,
            mask=self.mask,
        )

    def enumerate(self, use_mask: bool = False) -> torch.Tensor:
        """All the values the spec can take, stacked along a new first dim."""
        values = torch.arange(self._num_values, device=self.device).to(self.dtype)
        if use_mask and self.mask is not None:
            values = values[self.mask.reshape(-1, self._num_values).all(0)]
        return values.reshape(-1, *(1,) * self.ndim).expand(-1, *self.shape)


class MultiCategorical(Categorical):
    """A concatenation of discrete tensor specs: slot ``i`` of the last dim is in ``[0, nvec[i])``.

    Args:
        nvec (sequence of int or torch.Tensor): the number of categories of each slot.
        shape (torch.Size, optional): the shape; its last dim is ``len(nvec)``. Defaults to
            ``nvec``'s shape.
        device (torch.device, optional): the device. Defaults to ``None`` (torch's default device).
        dtype (torch.dtype, optional): the dtype. Defaults to ``torch.int64``.
        mask (torch.Tensor, optional): booleans of shape ``(*shape[:-1], sum(nvec))``.
            Defaults to ``None``.
        remove_singleton (bool, optional): when the spec's shape is ``(1,)`` (one slot, as
            for ``MultiCategorical(5)``), :meth:`rand` drops that trailing singleton dim;
            :meth:`is_in` and :meth:`project` take values with or without it. Defaults to
            ``True``.

    Raises:
        ValueError: if some ``nvec`` entry is negative or ``shape`` does not end with
            ``len(nvec)``.

    Examples:
        >>> import torch
        >>> spec = MultiCategorical([3, 2], shape=(4, 2))
        >>> spec.rand().shape, spec.cardinality()
        (torch.Size([4, 2]), 6)
        >>> spec.is_in(torch.tensor([[2, 1]] * 4)), spec.is_in(torch.tensor([[3, 1]] * 4))
        (True, False)
        >>> spec.to_one_hot_spec().shape
        torch.Size([4, 5])
        >>> single = MultiCategorical(5)  # one slot: samples drop the slot dim
        >>> single.shape, single.rand().shape, single.rand((3,)).shape
        (torch.Size([1]), torch.Size([]), torch.Size([3]))
    """

    _event_ndim = 1

    def __init__(
        self,
        nvec: Sequence[int] | torch.Tensor,
        shape: ShapeLike | None = None,
        device: DeviceLike = None,
        dtype: torch.dtype | str = torch.int64,
        mask: torch.Tensor | None = None,
        remove_singleton: bool = True,
    ) -> None:
        owner = type(self).__name__
        device = _as_device(device)
        nvec_t = torch.as_tensor(nvec, device=device, dtype=torch.int64)
        if nvec_t.ndim == 0:
            nvec_t = nvec_t.unsqueeze(0)
        shape = nvec_t.shape if shape is None else _as_shape(shape, owner=owner)
        if not shape or shape[-1] != nvec_t.shape[-1]:
            raise ValueError(
                f"{owner} expected shape to end with len(nvec)={nvec_t.shape[-1]}, got shape "
                f"{tuple(shape)}. Pass shape=(*batch, {nvec_t.shape[-1]})."
            )
        if bool((nvec_t < 0).any()):
            _check_n(int(nvec_t.min()), owner=owner, name="every nvec entry")
        storage = torch.Size(1 if d == -1 else d for d in shape)  # dynamic dims share nvec
        self.nvec = nvec_t.expand(storage).clone()
        self.remove_singleton = remove_singleton
        self._squeezed = bool(remove_singleton) and shape == (1,)
        nvec_row = self.nvec.reshape(-1, shape[-1])[0].tolist()
        TensorSpec.__init__(
            self,
            shape,
            BoxList.from_nvec(nvec_row),
            device,
            _as_dtype(dtype, torch.int64, owner=owner),
            "discrete",
        )
        self._nvec_row = nvec_row
        self._num_values = max(nvec_row)
        self.mask = _check_mask(mask, self._mask_shape(), device, owner=owner)

    def _mask_shape(self) -> torch.Size:
        return torch.Size((*self.shape[:-1], sum(self._nvec_row)))

    def cardinality(self) -> int:
        return math.prod(self._nvec_row)

    def _tensor_attrs(self) -> dict[str, torch.Tensor]:
        return {"nvec": self.nvec, **super()._tensor_attrs()}

    def _rebuild(
        self, shape: torch.Size, attrs: dict[str, torch.Tensor], **overrides: Any
    ) -> TensorSpec:
        return type(self)(
            attrs["nvec"],
            shape=shape,
            device=overrides.get("device", self.device),
            dtype=overrides.get("dtype", self.dtype),
            mask=attrs.get("mask"),
            remove_singleton=self.remove_singleton,
        )

    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        full = self._full_shape(shape, "rand")
        if 0 in self._nvec_row:
            raise _no_category(type(self).__name__, self._nvec_row)
        if self.mask is None:
            draw = torch.rand(full, device=self.device)
            out = (draw * self.nvec).floor_().to(self.dtype)
        else:
            lead = full[: len(full) - self.ndim]
            chunks = self.mask.split(self._nvec_row, dim=-1)
            out = torch.stack([_sample_masked(m, lead) for m in chunks], -1).to(self.dtype)
        return out.squeeze(-1) if self._squeezed else out

    def _with_slot_dim(self, val: torch.Tensor) -> torch.Tensor:
        """``val`` with its slot dim, which a one-slot spec's samples leave out."""
        if self._squeezed and val.shape[-1:] != (1,):
            return val.unsqueeze(-1)
        return val

    def is_in(self, val: torch.Tensor) -> bool:
        if self._squeezed and isinstance(val, torch.Tensor):
            val = self._with_slot_dim(val)
        if not self._basic_match(val):
            return False
        if not bool(((val >= 0) & (val < self.nvec)).all()):
            return False
        if self.mask is None:
            return True
        chunks = self.mask.split(self._nvec_row, dim=-1)
        return all(_mask_allows(m, v) for m, v in zip(chunks, val.unbind(-1), strict=True))

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        shape = val.shape
        val = self._with_slot_dim(val)
        if val.is_floating_point():
            val = val.round()
        val = torch.minimum(val.clamp_min(0), self.nvec - 1).to(self.dtype)
        if self.mask is not None:
            chunks = self.mask.split(self._nvec_row, dim=-1)
            slots = [_project_masked(v, m) for v, m in zip(val.unbind(-1), chunks, strict=True)]
            val = torch.stack(slots, -1)
        return val.reshape(shape)

    def index(self, index: torch.Tensor, tensor_to_index: torch.Tensor) -> torch.Tensor:
        """Pick one entry per slot: slot ``i`` of ``tensor_to_index`` is its ``nvec[i]`` chunk."""
        chunks = tensor_to_index.split(self._nvec_row, dim=-1)
        index = self._with_slot_dim(index)
        return torch.stack(
            [
                Categorical(n).index(i, c)
                for n, i, c in zip(self._nvec_row, index.unbind(-1), chunks, strict=True)
            ],
            -1,
        )

    def to_one_hot(self, val: torch.Tensor, safe: bool | None = None) -> torch.Tensor:
        """Encode each slot as a one-hot chunk and concatenate the chunks."""
        if safe:
            self.assert_is_in(val)
        val = self._with_slot_dim(val)
        return torch.cat(
            [
                torch.nn.functional.one_hot(v.long(), n).bool()
                for v, n in zip(val.unbind(-1), self._nvec_row, strict=True)
            ],
            -1,
        )

    def to_one_hot_spec(self) -> MultiOneHot:
        """The :class:`MultiOneHot` spec of :meth:`to_one_hot`'s outputs."""
        return ONE_HOT_CLASSES["multi"](
            self._nvec_row,
            shape=(*self.shape[:-1], sum(self._nvec_row)),
            device=self.device,
            mask=self.mask,
        )

    def enumerate(self, use_mask: bool = False) -> torch.Tensor:
        """All the combinations of slot values, stacked along a new first dim."""
        grids = torch.cartesian_prod(*[torch.arange(n) for n in self._nvec_row])
        grids = grids.reshape(-1, len(self._nvec_row)).to(self.device, self.dtype)
        return grids.reshape(-1, *(1,) * (self.ndim - 1), self.shape[-1]).expand(-1, *self.shape)
