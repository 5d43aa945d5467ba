"""One-hot specs: :class:`OneHot` and :class:`MultiOneHot` (one one-hot chunk per slot)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from . import _categorical
from ._base import DeviceLike, ShapeLike, TensorSpec, _as_device, _as_dtype, _as_shape
from ._masks import _check_mask, _check_n, _MaskedCategories, _no_category, _sample_masked
from ._spaces import BoxList, CategoricalBox


def _one_hot_shape(shape: ShapeLike | None, size: int, *, owner: str) -> torch.Size:
    shape = torch.Size((size,)) if shape is None else _as_shape(shape, owner=owner)
    if not shape or shape[-1] != size:
        raise ValueError(
            f"{owner} expected shape to end with the one-hot size {size}, got shape "
            f"{tuple(shape)}. Pass shape=(*batch, {size})."
        )
    return shape


@functools.lru_cache(maxsize=64)
def _identity(n: int, dtype: torch.dtype, device: torch.device | None) -> torch.Tensor:
    """The ``n x n`` identity, whose rows are the one-hot vectors; never written to.

    Indexing its rows (which copies them) is about three times cheaper than
    ``one_hot(...).to(dtype)``, which makes an int64 tensor and then converts it.
    """
    return torch.eye(n, dtype=dtype, device=device)


@functools.lru_cache(maxsize=32)
def _numpy_dtype(dtype: torch.dtype) -> np.dtype | None:
    """numpy's dtype for ``dtype``; ``None`` where numpy has none (bfloat16 and friends)."""
    try:
        return torch.empty(0, dtype=dtype).numpy().dtype
    except TypeError:
        return None


def _is_one_hot(val: torch.Tensor) -> bool:
    if val.dtype is torch.bool:  # booleans are 0/1 already: only count the ones
        return bool((val.sum(-1) == 1).all())
    return bool(((val == 0) | (val == 1)).all() and (val.sum(-1) == 1).all())


def _masked_argmax(val: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    scores = val.float()
    if mask is not None:
        scores = scores.masked_fill(~mask.expand_as(scores), float("-inf"))
    return scores.argmax(-1)


class OneHot(_MaskedCategories, TensorSpec):
    """A one-hot discrete tensor spec: the last dim (of size ``n``) holds exactly one 1.

    Args:
        n (int): the number of categories.
        shape (torch.Size, optional): the shape, ending with ``n``. Defaults to ``(n,)``.
        device (torch.device, optional): the device. Defaults to ``None`` (torch's default device).
        dtype (torch.dtype, optional): the dtype. Defaults to ``torch.bool``.
        use_register (bool, optional): kept for API compatibility. Defaults to ``False``.
        mask (torch.Tensor, optional): booleans of shape ``shape``; ``False`` forbids a
            category. Defaults to ``None``.

    Raises:
        TypeError: if ``n`` is not an int.
        ValueError: if ``n <= 0`` or ``shape`` does not end with ``n``.

    Examples:
        >>> import torch
        >>> spec = OneHot(3)
        >>> spec.shape, spec.dtype
        (torch.Size([3]), torch.bool)
        >>> spec.encode(2)
        tensor([False, False,  True])
        >>> spec.to_categorical(torch.tensor([False, True, False]))
        tensor(1)
        >>> spec.to_categorical_spec().n
        3
        >>> spec.update_mask(torch.tensor([True, False, False]))
        >>> spec.rand()
        tensor([ True, False, False])
    """

    _event_ndim = 1

    def __init__(
        self,
        n: int,
        shape: ShapeLike | None = None,
        device: DeviceLike = None,
        dtype: torch.dtype | str | None = torch.bool,
        use_register: bool = False,
        mask: torch.Tensor | None = None,
    ) -> None:
        owner = type(self).__name__
        n = _check_n(n, owner=owner)
        device = _as_device(device)
        shape = _one_hot_shape(shape, n, owner=owner)
        dtype = _as_dtype(dtype, torch.bool, owner=owner)
        super().__init__(shape, CategoricalBox(n), device, dtype, "discrete")
        self.use_register = use_register
        self.mask = _check_mask(mask, shape, device, owner=owner)

    def _mask_shape(self) -> torch.Size:
        return self.shape

    def _rebuild(
        self, shape: torch.Size, attrs: dict[str, torch.Tensor], **overrides: Any
    ) -> TensorSpec:
        return type(self)(
            self.space.n,
            shape=shape,
            device=overrides.get("device", self.device),
            dtype=overrides.get("dtype", self.dtype),
            use_register=self.use_register,
            mask=attrs.get("mask"),
        )

    def _indices(self, full: torch.Size) -> torch.Tensor:
        """Category indices for data of shape ``full`` (leading dims + the drawn spec shape)."""
        if self.mask is None:
            return torch.randint(0, self.space.n, full[:-1], device=self.device)
        return _sample_masked(self.mask, full[: len(full) - self.ndim])

    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        full = self._full_shape(shape, "rand")
        if not full[-1]:
            raise _no_category(type(self).__name__, self.space.n)
        np_dtype = _numpy_dtype(self.dtype)
        device = self.device
        if (
            len(full) == 1
            and self.mask is None
            and np_dtype is not None
            and (device is None or device.type == "cpu")
        ):
            # one vector (an unbatched env's action): the same draw as below, the row built
            # by numpy, about half the cost of indexing the identity and copying the row
            row = np.zeros(full[0], dtype=np_dtype)
            row[int(torch.randint(0, full[0], (), device=device))] = 1
            return torch.from_numpy(row)
        idx = self._indices(full)
        rows = _identity(self.space.n, self.dtype, self.device)[idx]
        # a 0-dim index is basic indexing: a view of the cached identity, so copy it
        return rows.clone() if idx.dim() == 0 else rows

    def is_in(self, val: torch.Tensor) -> bool:
        if not self._basic_match(val) or not _is_one_hot(val):
            return False
        return self.mask is None or not bool((val.bool() & ~self.mask).any())

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        idx = _masked_argmax(val, self.mask)
        return torch.nn.functional.one_hot(idx, self.space.n).to(self.dtype)

    def encode(self, val: Any, *, ignore_device: bool = False) -> torch.Tensor:
        """Build a one-hot tensor from a one-hot array or from category indices.

        Examples:
            >>> import numpy as np
            >>> OneHot(3, shape=(2, 3)).encode(np.array([0, 2])).int()
            tensor([[1, 0, 0],
                    [0, 0, 1]], dtype=torch.int32)
        """
        device = None if ignore_device else self.device
        tensor = torch.as_tensor(val, device=device)
        if tensor.shape == self.shape[:-1] and not tensor.dtype.is_floating_point:
            tensor = torch.nn.functional.one_hot(tensor.long(), self.space.n)
        return self._fit_shape(tensor.to(self.dtype))

    def to_numpy(self, val: torch.Tensor, safe: bool | None = None) -> np.ndarray:
        """The category indices of ``val`` as a numpy array, the inverse of :meth:`encode`.

        Args:
            val (torch.Tensor): one-hot values of the spec.
            safe (bool, optional): check ``val`` with :meth:`assert_is_in` first. Defaults
                to ``None`` (no check).

        Examples:
            >>> import torch
            >>> OneHot(3).to_numpy(torch.tensor([False, False, True]))
            array(2)
            >>> MultiOneHot([2, 3]).to_numpy(torch.tensor([0, 1, 0, 0, 1]))
            array([1, 2])
        """
        return self.to_categorical(val, safe=safe).detach().cpu().numpy()

    def _extra_eq(self, other: TensorSpec) -> bool:
        return super()._extra_eq(other) and self.use_register == other.use_register

    def to_categorical(self, val: torch.Tensor, safe: bool | None = None) -> torch.Tensor:
        """Return the index of the 1 of each one-hot vector (drops the last dim)."""
        if safe:
            self.assert_is_in(val)
        return val.long().argmax(-1)

    def to_categorical_spec(self) -> _categorical.Categorical:
        """The :class:`Categorical` spec of :meth:`to_categorical`'s outputs."""
        return _categorical.Categorical(
            self.space.n, shape=self.shape[:-1], device=self.device, mask=self.mask
        )

    def index(self, index: torch.Tensor, tensor_to_index: torch.Tensor) -> torch.Tensor:
        """Pick the entry of ``tensor_to_index`` that the one-hot ``index`` selects.

        Examples:
            >>> import torch
            >>> OneHot(3).index(torch.tensor([0, 0, 1]), torch.tensor([0.1, 0.2, 0.3]))
            tensor(0.3000)
        """
        idx = index.long().argmax(-1, keepdim=True)
        idx = idx.expand(*tensor_to_index.shape[:-1], 1)
        return tensor_to_index.gather(-1, idx).squeeze(-1)

    def enumerate(self, use_mask: bool = False) -> torch.Tensor:
        """All the one-hot vectors the spec can take, stacked along a new first dim."""
        eye = torch.eye(self.space.n, device=self.device).to(self.dtype)
        if use_mask and self.mask is not None:
            eye = eye[self.mask.reshape(-1, self.space.n).all(0)]
        return eye.reshape(-1, *(1,) * (self.ndim - 1), self.space.n).expand(-1, *self.shape)


class MultiOneHot(OneHot):
    """A concatenation of one-hot discrete tensor specs, one chunk of ``nvec[i]`` per slot.

    Args:
        nvec (sequence of int): the number of categories of each slot.
        shape (torch.Size, optional): the shape, ending with ``sum(nvec)``. Defaults to
            ``(sum(nvec),)``.
        device (torch.device, optional): the device. Defaults to ``None`` (torch's default device).
        dtype (torch.dtype, optional): the dtype. Defaults to ``torch.bool``.
        use_register (bool, optional): kept for API compatibility. Defaults to ``False``.
        mask (torch.Tensor, optional): booleans of shape ``shape``. Defaults to ``None``.

    Raises:
        ValueError: if some ``nvec`` entry is ``<= 0`` or ``shape`` does not end with
            ``sum(nvec)``.

    Examples:
        >>> import torch
        >>> spec = MultiOneHot([2, 3])
        >>> spec.shape, spec.cardinality()
        (torch.Size([5]), 6)
        >>> spec.to_categorical(torch.tensor([0, 1, 0, 0, 1]))
        tensor([1, 2])
        >>> spec.to_categorical_spec().nvec
        tensor([2, 3])
    """

    def __init__(
        self,
        nvec: Sequence[int],
        shape: ShapeLike | None = None,
        device: DeviceLike = None,
        dtype: torch.dtype | str | None = torch.bool,
        use_register: bool = False,
        mask: torch.Tensor | None = None,
    ) -> None:
        owner = type(self).__name__
        nvec = [
            _check_n(int(n), owner=owner, name="every nvec entry")
            for n in torch.as_tensor(nvec).reshape(-1).tolist()
        ]
        device = _as_device(device)
        shape = _one_hot_shape(shape, sum(nvec), owner=owner)
        dtype = _as_dtype(dtype, torch.bool, owner=owner)
        TensorSpec.__init__(self, shape, BoxList.from_nvec(nvec), device, dtype, "discrete")
        self.nvec = nvec
        self.use_register = use_register
        self.mask = _check_mask(mask, shape, device, owner=owner)

    @property
    def n(self) -> int:
        """The total size of the one-hot dim, ``sum(nvec)``."""
        return sum(self.nvec)

    def cardinality(self) -> int:
        out = 1
        for n in self.nvec:
            out *= n
        return out

    def _rebuild(
        self, shape: torch.Size, attrs: dict[str, torch.Tensor], **overrides: Any
    ) -> TensorSpec:
        return type(self)(
            self.nvec,
            shape=shape,
            device=overrides.get("device", self.device),
            dtype=overrides.get("dtype", self.dtype),
            use_register=self.use_register,
            mask=attrs.get("mask"),
        )

    def _chunks(self, val: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return val.split(self.nvec, dim=-1)

    def _mask_chunks(self) -> list[torch.Tensor | None]:
        if self.mask is None:
            return [None] * len(self.nvec)
        return list(self._chunks(self.mask))

    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        full = self._full_shape(shape, "rand")
        if 0 in self.nvec:
            raise _no_category(type(self).__name__, self.nvec)
        lead = full[: len(full) - self.ndim]
        parts = []
        for n, mask in zip(self.nvec, self._mask_chunks(), strict=True):
            if mask is None:
                idx = torch.randint(0, n, full[:-1], device=self.device)
            else:
                idx = _sample_masked(mask, lead)
            parts.append(torch.nn.functional.one_hot(idx, n))
        return torch.cat(parts, -1).to(self.dtype)

    def is_in(self, val: torch.Tensor) -> bool:
        if not self._basic_match(val):
            return False
        if not all(_is_one_hot(chunk) for chunk in self._chunks(val)):
            return False
        return self.mask is None or not bool((val.bool() & ~self.mask).any())

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        parts = [
            torch.nn.functional.one_hot(_masked_argmax(chunk, mask), n)
            for chunk, mask, n in zip(
                self._chunks(val), self._mask_chunks(), self.nvec, strict=True
            )
        ]
        return torch.cat(parts, -1).to(self.dtype)

    def encode(self, val: Any, *, ignore_device: bool = False) -> torch.Tensor:
        device = None if ignore_device else self.device
        tensor = torch.as_tensor(val, device=device)
        if tensor.shape[-1:] == (len(self.nvec),) and tensor.shape[:-1] == self.shape[:-1]:
            tensor = torch.cat(
                [
                    torch.nn.functional.one_hot(v.long(), n)
                    for v, n in zip(tensor.unbind(-1), self.nvec, strict=True)
                ],
                -1,
            )
        return self._fit_shape(tensor.to(self.dtype))

    def to_categorical(self, val: torch.Tensor, safe: bool | None = None) -> torch.Tensor:
        """Return the index of the 1 of each chunk, stacked along the last dim."""
        if safe:
            self.assert_is_in(val)
        return torch.stack([chunk.long().argmax(-1) for chunk in self._chunks(val)], -1)

    def to_categorical_spec(self) -> _categorical.MultiCategorical:
        """The :class:`MultiCategorical` spec of :meth:`to_categorical`'s outputs."""
        return _categorical.MultiCategorical(
            self.nvec,
            shape=(*self.shape[:-1], len(self.nvec)),
            device=self.device,
            mask=self.mask,
        )

    def index(self, index: torch.Tensor, tensor_to_index: torch.Tensor) -> torch.Tensor:
        """Pick one entry of ``tensor_to_index`` per chunk, stacked along the last dim."""
        return torch.stack(
            [
                OneHot(n).index(i, t)
                for n, i, t in zip(
                    self.nvec, self._chunks(index), self._chunks(tensor_to_index), strict=True
                )
            ],
            -1,
        )

    def enumerate(self, use_mask: bool = False) -> torch.Tensor:
        """All the combinations of one-hot chunks, stacked along a new first dim."""
        combos = torch.cartesian_prod(*[torch.arange(n) for n in self.nvec])
        combos = combos.reshape(-1, len(self.nvec))
        flat = torch.cat(
            [torch.nn.functional.one_hot(c, n) for c, n in zip(combos.T, self.nvec, strict=True)],
            -1,
        ).to(self.device, self.dtype)
        return flat.reshape(-1, *(1,) * (self.ndim - 1), self.shape[-1]).expand(-1, *self.shape)


_categorical.ONE_HOT_CLASSES.update(single=OneHot, multi=MultiOneHot)
