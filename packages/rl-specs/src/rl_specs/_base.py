"""The :class:`TensorSpec` base class and the shape, device and index helpers every spec shares."""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from ._errors import _MismatchError, _NotInSpecError, _NotInSpecTypeError
from ._indexing import _checked_index
from ._shapes import _drawn_shape, _pos_dim, _shape_after, _shape_matches

ShapeLike = torch.Size | Sequence[int] | int
DeviceLike = torch.device | str | int | None

__all__ = ["TensorSpec"]


def _as_shape(shape: Any, *, owner: str) -> torch.Size:
    """Turn an int, a sequence of ints or a ``torch.Size`` into a ``torch.Size``.

    ``-1`` marks a dynamic dim; any other negative size is refused.
    """
    if shape is None:
        return torch.Size([])
    if isinstance(shape, int):
        shape = (shape,)
    try:
        if isinstance(shape, (str, bytes)):
            raise TypeError(shape)
        dims = tuple(operator.index(d) for d in shape)
    except TypeError as err:
        raise TypeError(
            f"{owner} expected shape to be an int, a sequence of ints or a torch.Size, "
            f"got {shape!r} of type {type(shape).__name__}. Pass e.g. shape=(3,)."
        ) from err
    if any(d < -1 for d in dims):
        raise ValueError(
            f"{owner} expected every dim of shape to be >= 0, or -1 for a dynamic dim, "
            f"got shape={tuple(dims)}. Fix the negative sizes."
        )
    return torch.Size(dims)


def _as_device(device: DeviceLike) -> torch.device | None:
    """Normalise a device argument; ``None`` stays ``None`` (meaning: the default, cpu)."""
    if device is None:
        return None
    if isinstance(device, torch.device):
        return device
    try:
        return torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(
            f"Expected a torch.device, a device string or an int for device, got {device!r}. "
            "Pass e.g. device='cpu' or device='cuda:0'."
        ) from err


def _as_dtype(dtype: Any, default: torch.dtype, *, owner: str) -> torch.dtype:
    """Return ``dtype`` as a ``torch.dtype`` (``None`` gives ``default``; strings are resolved)."""
    if dtype is None:
        return default
    if isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str):
        found = getattr(torch, dtype.removeprefix("torch."), None)
        if isinstance(found, torch.dtype):
            return found
    raise TypeError(
        f"{owner} expected dtype to be a torch.dtype or its name, got {dtype!r}. "
        "Pass e.g. dtype=torch.float32 or dtype='int64'."
    )


def _expand_target(old: torch.Size, shape: Any, *, owner: str) -> torch.Size:  # Any: ShapeLike
    """The shape that expanding ``old`` to ``shape`` gives.

    A ``-1`` over a size-1 dim makes it dynamic (as over a new leading dim); over any
    other size it keeps that size.

    Raises:
        ValueError: if ``shape`` does not end with a shape ``old`` broadcasts to.
    """
    new = _as_shape(shape, owner=f"{owner}.expand")
    lead = len(new) - len(old)
    target = list(new)
    for i, s_old in enumerate(old):
        s_new = new[lead + i] if lead >= 0 else None
        if s_new == -1:
            target[lead + i] = -1 if s_old == 1 else s_old
        elif s_new is None or (s_new != s_old and s_old not in (1, -1)):
            raise ValueError(
                f"{owner}.expand cannot expand shape {tuple(old)} to {tuple(new)}: the new "
                "shape must end with the spec's shape (size-1 dims may grow). Prepend the "
                "new dims, e.g. spec.expand(4, *spec.shape)."
            )
    return torch.Size(target)


def _unbind_at(spec: Any, pos: int) -> tuple:  # Any: a TensorSpec (leaf or composite)
    """``spec`` split along its dim ``pos`` (non-negative), by indexing.

    Raises:
        ValueError: if that dim is dynamic (``-1``).
    """
    if spec.shape[pos] == -1:
        raise ValueError(
            f"{type(spec).__name__}.unbind cannot split dynamic dim {pos} (size -1). "
            "Make it concrete with spec.expand first."
        )
    lead = (slice(None),) * pos
    return tuple(spec[(*lead, i)] for i in range(spec.shape[pos]))


class TensorSpec:
    """Parent class of the tensor meta-data containers.

    A spec records the ``shape``, ``device``, ``dtype`` and domain (``space``) of a tensor
    and can generate (:meth:`rand`, :meth:`zero`, :meth:`one`), check (:meth:`is_in`),
    fix (:meth:`project`) and build (:meth:`encode`) values that belong to it. Specs
    can be reshaped, indexed, squeezed, unsqueezed, expanded, unbound and moved to a
    device as tensors are. A dim of size ``-1`` is *dynamic*: data may have any size
    along it; :meth:`rand`, :meth:`zero` and :meth:`one` build such a dim at size 1
    (use :meth:`expand` first for another size).

    Args:
        shape (torch.Size): the shape of the tensors.
        space: the domain of the values (a box object, ``None`` for unbounded data).
        device (torch.device, optional): the device of the tensors. Defaults to ``None``
            (torch's default device, usually cpu): leaves always have a device.
        dtype (torch.dtype): the dtype of the tensors.
        domain (str): ``"continuous"`` or ``"discrete"``. Defaults to ``""``.

    ``torch.stack``, ``torch.squeeze``, ``torch.unsqueeze``, ``torch.unbind`` and
    ``torch.index_select`` accept specs and return specs.

    Examples:
        >>> import torch
        >>> from rl_specs import Bounded
        >>> spec = Bounded(low=-1.0, high=1.0, shape=(2, 3))
        >>> isinstance(spec, TensorSpec), spec.shape, spec.ndim
        (True, torch.Size([2, 3]), 2)
        >>> spec.rand((4,)).shape
        torch.Size([4, 2, 3])
        >>> spec.is_in(spec.rand())
        True
        >>> torch.unsqueeze(spec, 0).shape, torch.index_select(spec, 1, torch.tensor([0, 2])).shape
        (torch.Size([1, 2, 3]), torch.Size([2, 2]))
    """

    #: Number of trailing dims that belong to one sample (e.g. the one-hot dim).
    _event_ndim: int = 0

    def __init__(
        self,
        shape: ShapeLike,
        space: Any,  # a box object, or None for unbounded specs
        device: DeviceLike = None,
        dtype: torch.dtype = torch.float32,
        domain: str = "",
    ) -> None:
        self.shape = _as_shape(shape, owner=type(self).__name__)
        self.space = space
        self.device = torch.get_default_device() if device is None else _as_device(device)
        self.dtype = dtype
        self.domain = domain

    # ------------------------------------------------------------------ properties
    @property
    def ndim(self) -> int:
        """Number of dims of the spec's shape."""
        return len(self.shape)

    def ndimension(self) -> int:
        """Number of dims of the spec's shape (same as :attr:`ndim`)."""
        return len(self.shape)

    def numel(self) -> int:
        """Number of elements of a tensor of this spec's shape (dynamic dims count as -1)."""
        if self.is_dynamic:
            return -1
        return self.shape.numel()

    @property
    def is_dynamic(self) -> bool:
        """Whether some dim of the shape is ``-1`` (its size varies from sample to sample)."""
        return -1 in self.shape

    # ------------------------------------------------------------------ generation
    def _full_shape(self, shape: ShapeLike | None, what: str) -> torch.Size:
        if shape is None or (type(shape) is torch.Size and not shape):
            full = self.shape  # the hot path: no leading shape
        elif type(shape) is torch.Size:
            full = shape + self.shape
        else:
            full = _as_shape(shape, owner=what) + self.shape
        if -1 in full:  # a dynamic dim: any size is valid, data is built at size 1
            full = _drawn_shape(full)
        return full

    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """Return a random value of the spec, with ``shape`` prepended to the spec's shape.

        A dynamic (``-1``) dim is drawn at size 1.
        """
        raise NotImplementedError  # abstract: every concrete spec implements it

    def zero(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """Return a zero-filled tensor of the spec, with ``shape`` prepended to its shape.

        A dynamic (``-1``) dim is built at size 1.
        """
        return torch.zeros(self._full_shape(shape, "zero"), dtype=self.dtype, device=self.device)

    def one(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """Return a one-filled tensor of the spec, with ``shape`` prepended to its shape.

        A dynamic (``-1``) dim is built at size 1.
        """
        return torch.ones(self._full_shape(shape, "one"), dtype=self.dtype, device=self.device)

    def sample(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """Alias of :meth:`rand`."""
        return self.rand(shape)

    # ------------------------------------------------------------------ checks
    def _basic_match(self, val: Any) -> bool:
        return (
            isinstance(val, torch.Tensor)
            and val.dtype == self.dtype
            and _shape_matches(val.shape, self.shape)
        )

    def is_in(self, val: torch.Tensor) -> bool:
        """Whether ``val`` has the spec's dtype, ends with its shape and lies in its domain."""
        raise NotImplementedError  # abstract: every concrete spec implements it

    def contains(self, item: torch.Tensor) -> bool:
        """Same as :meth:`is_in`: whether ``item`` could have been generated by the spec."""
        return self.is_in(item)

    def assert_is_in(self, value: torch.Tensor) -> None:
        """Raise an error naming the mismatch if ``value`` does not belong to the spec.

        Raises:
            TypeError: if ``value`` is not a tensor or has another dtype.
            ValueError: if its shape or values do not fit the spec.

        Both errors are also ``AssertionError`` s, which code written for TorchRL catches.
        """
        if not isinstance(value, torch.Tensor):
            raise _NotInSpecTypeError(
                f"{type(self).__name__} expected a torch.Tensor, got {type(value).__name__}. "
                "Convert the value with spec.encode(value)."
            )
        if value.dtype != self.dtype:
            raise _NotInSpecTypeError(
                f"{type(self).__name__} expected dtype {self.dtype}, got {value.dtype}. "
                f"Cast the value with value.to({self.dtype}) or use spec.encode(value)."
            )
        if not _shape_matches(value.shape, self.shape):
            raise _NotInSpecError(
                f"{type(self).__name__} expected a value whose shape ends with "
                f"{tuple(self.shape)}, got shape {tuple(value.shape)}. Reshape the value."
            )
        if not self.is_in(value):
            raise _NotInSpecError(
                f"{type(self).__name__} got a value outside its domain {self.space!r}. "
                "Use spec.project(value) to map it into the domain."
            )

    def type_check(self, value: torch.Tensor, key: Any = None) -> None:
        """Check the dtype of ``value``.

        Raises:
            TypeError: if ``value``'s dtype differs from the spec's.
        """
        if value.dtype is not self.dtype:
            raise TypeError(
                f"{type(self).__name__} at key {key!r} expected dtype {self.dtype}, got "
                f"{value.dtype}. Cast the value with value.to({self.dtype})."
            )

    def project(self, val: torch.Tensor) -> torch.Tensor:
        """Map ``val`` into the spec's domain (values already in it are returned as they are)."""
        if self.is_in(val):
            return val
        return self._project(val)

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError  # abstract: every concrete spec implements it

    # ------------------------------------------------------------------ conversion
    def encode(self, val: Any, *, ignore_device: bool = False) -> torch.Tensor:
        """Build a tensor of the spec from a numpy array, a python value or a tensor.

        The value is reshaped to the spec's shape when it has as many elements; a batch
        of values is encoded by ``spec.expand(*batch, *spec.shape)``.

        Args:
            val: the value to encode.
            ignore_device (bool, optional): keep the value's device. Defaults to ``False``.

        Raises:
            ValueError: if the value's number of elements does not fit the spec's shape
                (also a ``RuntimeError``, as TorchRL raises).

        Examples:
            >>> import numpy as np
            >>> from rl_specs import Unbounded
            >>> Unbounded(shape=(2, 2)).encode(np.arange(4.0)).shape
            torch.Size([2, 2])
            >>> Unbounded(shape=(2,)).expand(3, 2).encode(np.zeros((3, 2))).shape
            torch.Size([3, 2])
        """
        device = None if ignore_device else self.device
        if isinstance(val, np.ndarray) and not val.flags.writeable:
            val = val.copy()
        out = torch.as_tensor(val, dtype=self.dtype, device=device)
        return self._fit_shape(out)

    def _fit_shape(self, out: torch.Tensor) -> torch.Tensor:
        shape = self.shape
        if out.shape == shape or (out.ndim == len(shape) and _shape_matches(out.shape, shape)):
            return out
        if not self.is_dynamic and out.numel() == shape.numel():
            return out.reshape(shape)
        raise _MismatchError(
            f"{type(self).__name__}.encode expected a value of shape {tuple(shape)} (or with "
            f"as many elements), got shape {tuple(out.shape)}: Shape mismatch. Reshape the "
            "value, or encode a batch with spec.expand(*batch, *spec.shape).encode(value)."
        )

    def to_numpy(self, val: torch.Tensor, safe: bool | None = None) -> np.ndarray:
        """Return ``val`` as a numpy array (checking it against the spec when ``safe``).

        Args:
            val (torch.Tensor): a value of the spec.
            safe (bool, optional): check ``val`` with :meth:`assert_is_in` first. Defaults
                to ``None`` (no check).
        """
        if safe:
            self.assert_is_in(val)
        return val.detach().cpu().numpy()

    def index(self, index: Any, tensor_to_index: torch.Tensor) -> torch.Tensor:
        """Index ``tensor_to_index`` with ``index`` (categorical specs pick along the last dim)."""
        return tensor_to_index[index]

    # ------------------------------------------------------------------ shape ops
    def _tensor_attrs(self) -> dict[str, torch.Tensor]:
        """Per-element tensors (bounds, masks) laid out as ``(*batch_shape, *extra)``."""
        return {}

    def _rebuild(
        self, shape: torch.Size, attrs: dict[str, torch.Tensor], **overrides: Any
    ) -> TensorSpec:
        """A copy of this spec with a new shape, per-element tensors and ``dtype``/``device``."""
        raise NotImplementedError  # abstract: every concrete spec implements it

    def _batch_ndim(self) -> int:
        return self.ndim - self._event_ndim

    def _apply_op(
        self, op: Callable[[torch.Tensor], torch.Tensor], new_batch: torch.Size | None = None
    ) -> TensorSpec:
        """Apply a shape op to the batch dims (all dims but the event dims) and to attrs."""
        b = self._batch_ndim()
        if new_batch is None:
            new_batch = _shape_after(self.shape[:b], op)
        attrs = {k: op(v) for k, v in self._tensor_attrs().items()}
        return self._rebuild(new_batch + self.shape[b:], attrs)

    def __getitem__(self, index: Any) -> TensorSpec:  # Any: any tensor index
        """Index the spec like a tensor (event dims such as the one-hot dim stay).

        Negative slice steps work as in numpy; a dynamic (``-1``) dim only takes a full
        slice.

        Raises:
            IndexError: if the index is out of bounds, indexes a dynamic dim or an event dim.
        """
        b = self._batch_ndim()
        idx, flips = _checked_index(index, self.shape[:b], owner=type(self).__name__)
        if flips:
            return self._apply_op(lambda t: t[idx].flip(flips))
        return self._apply_op(lambda t: t[idx])

    def expand(self, *shape: int | Sequence[int]) -> TensorSpec:
        """Expand the spec to ``shape`` (new leading dims, or size-1 dims broadcast).

        A ``-1`` keeps the spec's size, except over a size-1 dim or as a new leading dim,
        where it makes the dim dynamic (its size then varies from sample to sample).

        Raises:
            ValueError: if ``shape`` does not end with a shape the spec broadcasts to.
        """
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = tuple(shape[0])
        target = _expand_target(self.shape, shape, owner=type(self).__name__)
        b = self._batch_ndim()
        new_b = len(target) - self._event_ndim
        if target[new_b:] != self.shape[b:]:
            raise ValueError(
                f"{type(self).__name__}.expand cannot change the event dims "
                f"{tuple(self.shape[b:])}, got {tuple(target)}. Only expand the leading dims."
            )
        attr_batch = tuple(1 if s == -1 else s for s in target[:new_b])
        return self._apply_op(lambda t: t.expand(*attr_batch, *t.shape[b:]), target[:new_b])

    def squeeze(self, dim: int | None = None) -> TensorSpec:
        """Remove the size-1 dim ``dim`` (or all size-1 batch dims when ``dim`` is ``None``)."""
        b = self._batch_ndim()
        if dim is None:
            dims = [i for i in range(b) if self.shape[i] == 1]
        else:
            dims = [_pos_dim(dim, self.ndim, owner=f"{type(self).__name__}.squeeze")]
            if dims[0] >= b:
                raise ValueError(
                    f"{type(self).__name__}.squeeze cannot remove event dim {dim}. "
                    "Squeeze a batch dim instead."
                )
            if self.shape[dims[0]] != 1:
                return self.clone()
        if not dims:
            return self.clone()
        return self._apply_op(lambda t: t.squeeze(tuple(dims)))

    def unsqueeze(self, dim: int) -> TensorSpec:
        """Insert a size-1 dim at ``dim`` (negative dims count from the end of the shape)."""
        b = self._batch_ndim()
        pos = _pos_dim(dim, self.ndim + 1, owner=f"{type(self).__name__}.unsqueeze")
        if pos > b:
            raise ValueError(
                f"{type(self).__name__}.unsqueeze cannot insert a dim after the event dims "
                f"(dim={dim} for shape {tuple(self.shape)}). Insert it at a dim <= {b}."
            )
        return self._apply_op(lambda t: t.unsqueeze(pos))

    def reshape(self, *shape: int | Sequence[int]) -> TensorSpec:
        """Reshape the spec (the event dims, if any, must stay at the end unchanged).

        Raises:
            ValueError: if the new shape has another number of elements.
        """
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = tuple(shape[0])
        new = torch.Size(shape)
        b = self._batch_ndim()
        if self._event_ndim:
            if new[len(new) - self._event_ndim :] != self.shape[b:]:
                raise ValueError(
                    f"{type(self).__name__}.reshape must keep the event dims "
                    f"{tuple(self.shape[b:])} last, got {tuple(new)}."
                )
            new = new[: len(new) - self._event_ndim]
        try:
            _shape_after(self.shape[:b], lambda t: t.reshape(new))
        except RuntimeError as err:
            raise ValueError(
                f"{type(self).__name__}.reshape cannot view shape {tuple(self.shape)} as "
                f"{tuple(shape)}: {err}. Keep the number of elements."
            ) from err
        return self._apply_op(lambda t: t.reshape(*new, *t.shape[b:]))

    view = reshape

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> TensorSpec:
        """Flatten the batch dims ``start_dim`` to ``end_dim``."""
        b = self._batch_ndim()
        start = _pos_dim(start_dim, b, owner=f"{type(self).__name__}.flatten")
        end = _pos_dim(end_dim, b, owner=f"{type(self).__name__}.flatten")
        return self._apply_op(lambda t: t.flatten(start, end))

    def unbind(self, dim: int = 0) -> tuple[TensorSpec, ...]:
        """Split the spec along ``dim`` into a tuple of specs, as ``torch.unbind`` would.

        Raises:
            ValueError: if ``dim`` is dynamic (``-1``) or an event dim.
        """
        pos = _pos_dim(dim, self.ndim, owner=f"{type(self).__name__}.unbind")
        if pos >= self._batch_ndim():
            raise ValueError(
                f"{type(self).__name__}.unbind cannot split the event dim {dim}. Pick a batch dim."
            )
        return _unbind_at(self, pos)

    # ------------------------------------------------------------------ devices, copies
    def to(self, dest: DeviceLike | torch.dtype) -> TensorSpec:
        """Return the spec on device ``dest`` (or with dtype ``dest`` when a dtype is given)."""
        attrs = self._tensor_attrs()
        if isinstance(dest, torch.dtype):
            return self._rebuild(self.shape, attrs, dtype=dest)
        device = _as_device(dest)
        if device == self.device:
            return self
        return self._rebuild(self.shape, {k: v.to(device) for k, v in attrs.items()}, device=device)

    def clear_device_(self) -> TensorSpec:
        """A no-op for leaf specs, which always have a device (composites drop theirs)."""
        return self

    def cpu(self) -> TensorSpec:
        """Return the spec on the cpu."""
        return self.to("cpu")

    def cuda(self, device: int | None = None) -> TensorSpec:
        """Return the spec on a cuda device (``cuda:device`` when given)."""
        return self.to("cuda" if device is None else f"cuda:{device}")

    def clone(self) -> TensorSpec:
        """Return a deep copy of the spec."""
        return self._rebuild(self.shape, {k: v.clone() for k, v in self._tensor_attrs().items()})

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return False
        if (self.shape, self.dtype, self.device, self.domain) != (
            other.shape,
            other.dtype,
            other.device,
            other.domain,
        ):
            return False
        mine, theirs = self._tensor_attrs(), other._tensor_attrs()
        if mine.keys() != theirs.keys():
            return False
        return all(
            a.shape == theirs[k].shape and torch.equal(a, theirs[k].to(a.device))
            for k, a in mine.items()
        ) and self._extra_eq(other)

    def _extra_eq(self, other: TensorSpec) -> bool:
        return True

    __hash__ = None  # type: ignore[assignment]  # specs are mutable

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(shape={self.shape}, space={self.space!r}, "
            f"device={self.device}, dtype={self.dtype}, domain={self.domain})"
        )

    # ------------------------------------------------------------------ torch functions
    @classmethod
    def __torch_function__(
        cls,
        func: Callable,
        types: tuple,
        args: tuple = (),
        kwargs: dict | None = None,
    ) -> Any:  # Any: whatever the torch function returns
        handler = _TORCH_HANDLERS.get(func)
        if handler is None:
            return NotImplemented
        return handler(*args, **(kwargs or {}))


def _index_select(spec: TensorSpec, dim: int, index: torch.Tensor) -> TensorSpec:
    pos = _pos_dim(dim, spec.ndim, owner="torch.index_select")
    return spec[(slice(None),) * pos + (index,)]


#: torch functions implemented for specs (``torch.stack`` is added by ``_stacked``).
_TORCH_HANDLERS: dict[Callable, Callable] = {
    torch.squeeze: lambda spec, dim=None: spec.squeeze(dim),
    torch.unsqueeze: lambda spec, dim: spec.unsqueeze(dim),
    torch.unbind: lambda spec, dim=0: spec.unbind(dim),
    torch.index_select: _index_select,
}
