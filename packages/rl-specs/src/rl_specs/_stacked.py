"""Lazy stacks of specs (:class:`Stacked`, :class:`StackedComposite`) and ``torch.stack``."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch
from tensordict import LazyStackedTensorDict, NestedKey, TensorDictBase

from ._base import (
    _TORCH_HANDLERS,
    DeviceLike,
    ShapeLike,
    TensorSpec,
    _as_shape,
)
from ._composite import Composite
from ._errors import _MismatchError
from ._indexing import _normalize_index
from ._keys import _is_key, _split_key
from ._shapes import _pos_dim, _shape_after
from ._stack_values import _StackValuesMixin


def _merged_shape(specs: Sequence[TensorSpec], dim: int) -> torch.Size:
    """Shape of a lazy stack: shared sizes kept, differing ones -1, ``len(specs)`` at ``dim``."""
    first = specs[0].shape
    merged = [d if all(s.shape[i] == d for s in specs) else -1 for i, d in enumerate(first)]
    merged.insert(dim, len(specs))
    return torch.Size(merged)


def _check_members(specs: Sequence[Any], dim: int, *, owner: str) -> int:
    """Validate the members of a stack; return the stack dim as a non-negative int.

    A composite without a device (``None``) stacks with composites on any device.

    Raises:
        ValueError: if there is no member, their ranks differ or their devices differ.
        TypeError: if a member is not a spec.
    """
    if not specs:
        raise ValueError(f"{owner} expected at least one spec to stack, got none.")
    for spec in specs:
        if not isinstance(spec, TensorSpec):
            raise TypeError(
                f"{owner} expected TensorSpec members, got {type(spec).__name__}. Stack specs only."
            )
    ndims = {spec.ndim for spec in specs}
    if len(ndims) != 1:
        raise _MismatchError(
            f"{owner} expected specs with the same number of dims. Ndims differ, got shapes "
            f"{[tuple(s.shape) for s in specs]}. Unsqueeze or reshape them first."
        )
    devices = {spec.device for spec in specs} - {None}
    if len(devices) > 1:
        raise _MismatchError(
            f"{owner} expected specs on one device, got {sorted(map(str, devices))}. "
            "Move them with spec.to(device) first."
        )
    return _pos_dim(dim, ndims.pop() + 1, owner=owner)


def _stack_members(specs: Sequence[TensorSpec], dim: int) -> TensorSpec:
    """Specs known to belong together, stacked: expanded when all are equal, else lazily.

    Entries of the members of a lazy stack may be of different classes and dtypes (a
    continuous action beside a one-hot one, as in a pool of different envs); each
    member of the resulting ``Stacked`` keeps its class.
    """
    specs = list(specs)
    pos = _check_members(specs, dim, owner="torch.stack")
    first = specs[0]
    if all(spec == first for spec in specs[1:]):
        shape = first.shape[:pos] + torch.Size([len(specs)]) + first.shape[pos:]
        return first.unsqueeze(pos).expand(shape)
    if all(isinstance(spec, Composite) for spec in specs):
        return StackedComposite(*specs, dim=pos)
    return Stacked(*specs, dim=pos)


def _torch_stack(specs: Sequence[TensorSpec], dim: int = 0) -> TensorSpec:
    """``torch.stack`` for specs: an expanded spec when all are equal, a lazy stack otherwise.

    Leaf specs must share their class and dtype; composites stack whatever their
    entries (a pool of envs with different action specs gives a ``StackedComposite``).

    Raises:
        ValueError: if the specs' classes, dtypes, ranks or devices differ, or ``dim`` is
            out of range. These errors are also the ``RuntimeError`` TorchRL raises.
    """
    specs = list(specs)
    first = specs[0] if specs else None
    if isinstance(first, Composite):
        leaves = [spec for spec in specs if not isinstance(spec, Composite)]
    else:
        leaves = [spec for spec in specs if not isinstance(spec, type(first))]
    if leaves:
        names = sorted({type(spec).__name__ for spec in specs})
        raise _MismatchError(
            f"torch.stack got specs of the classes {names}. Stacking specs cannot occur: "
            "Found more than one type of specs in the list. Convert them to one class, or "
            "stack the Composites that hold them (their entries may differ)."
        )
    dtypes = list(dict.fromkeys(spec.dtype for spec in specs))
    if first is not None and not isinstance(first, Composite) and len(dtypes) > 1:
        raise _MismatchError(
            f"torch.stack expected specs of one dtype. Dtypes differ, got {dtypes}. "
            "Cast them first, e.g. spec.to(torch.float32)."
        )
    return _stack_members(specs, dim)


_TORCH_HANDLERS[torch.stack] = _torch_stack


class _StackMixin(_StackValuesMixin):
    """Shape ops shared by the lazy stacks: members ``_specs`` stacked along ``dim``."""

    _specs: list
    dim: int
    shape: torch.Size

    def _restack(self, members: Sequence[TensorSpec], dim: int) -> TensorSpec:
        return _stack_members(members, dim) if len(members) else type(self)(dim=dim)

    def _index_stack(self, index: Any) -> Any:  # Any: a tensor index; a spec or a stack
        idx = _normalize_index(index, self._batch_ndim(), owner=type(self).__name__)
        idx = idx + (slice(None),) * (self.dim + 1 - len(idx))
        before, at, after = idx[: self.dim], idx[self.dim], idx[self.dim + 1 :]
        if any(i is None for i in idx[: self.dim + 1]):
            raise IndexError(
                f"{type(self).__name__} cannot insert dims (None) before its stack dim. "
                "Use spec.unsqueeze(dim) instead."
            )
        dim = self.dim - sum(isinstance(i, int) for i in before)
        members = [m[before] if before else m for m in self._specs]
        if isinstance(at, int):
            member = members[at]
            return member[(slice(None),) * dim + after] if after else member
        picked = (
            members[at]
            if isinstance(at, slice)
            else [members[i] for i in torch.as_tensor(at).reshape(-1).tolist()]
        )
        if after:
            picked = [m[(slice(None),) * dim + after] for m in picked]
        return self._restack(picked, dim)

    def unbind(self, dim: int = 0) -> tuple[TensorSpec, ...]:
        """Split along ``dim``: the members along the stack dim, restacked parts elsewhere."""
        pos = _pos_dim(dim, self._batch_ndim(), owner=f"{type(self).__name__}.unbind")
        if pos == self.dim:
            return tuple(self._specs)
        inner = pos if pos < self.dim else pos - 1
        parts = [m.unbind(inner) for m in self._specs]
        new_dim = self.dim - 1 if pos < self.dim else self.dim
        return tuple(self._restack(list(group), new_dim) for group in zip(*parts, strict=True))

    def expand(self, *shape: int | Sequence[int]) -> TensorSpec:
        """Expand every member: prepend dims, or grow size-1 dims (a size-1 stack repeats).

        Raises:
            ValueError: if ``shape`` does not end with a shape the spec broadcasts to.
        """
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = tuple(shape[0])
        new = _as_shape(shape, owner=f"{type(self).__name__}.expand")
        lead = len(new) - len(self.shape)
        if lead < 0 or any(
            s not in (-1, o) and o not in (-1, 1)
            for s, o in zip(new[lead:], self.shape, strict=True)
        ):
            raise ValueError(
                f"{type(self).__name__}.expand expected a shape ending with "
                f"{tuple(self.shape)} (size-1 dims may grow), got {tuple(new)}. "
                "Prepend the new dims."
            )
        tail = list(new[lead:])
        size = tail.pop(self.dim)
        members = list(self._specs)
        if size not in (-1, len(members)):
            members = members * size
        return type(self)(*[m.expand(*new[:lead], *tail) for m in members], dim=self.dim + lead)

    def unsqueeze(self, dim: int) -> TensorSpec:
        """Insert a size-1 dim at ``dim``."""
        pos = _pos_dim(dim, len(self.shape) + 1, owner=f"{type(self).__name__}.unsqueeze")
        if pos <= self.dim:
            return type(self)(*[m.unsqueeze(pos) for m in self._specs], dim=self.dim + 1)
        return type(self)(*[m.unsqueeze(pos - 1) for m in self._specs], dim=self.dim)

    def squeeze(self, dim: int | None = None) -> TensorSpec:
        """Remove the size-1 dim ``dim`` (all size-1 dims when ``None``)."""
        if dim is None:
            out: Any = self
            for d in reversed(range(self._batch_ndim())):
                if self.shape[d] == 1:
                    out = out.squeeze(d)
            return out
        pos = _pos_dim(dim, len(self.shape), owner=f"{type(self).__name__}.squeeze")
        if self.shape[pos] != 1:
            return self.clone()
        if pos == self.dim:
            return self._specs[0]
        inner = pos if pos < self.dim else pos - 1
        new_dim = self.dim - 1 if pos < self.dim else self.dim
        return type(self)(*[m.squeeze(inner) for m in self._specs], dim=new_dim)

    def to(self, dest: DeviceLike | torch.dtype) -> TensorSpec:
        """Move (or cast) every member."""
        return type(self)(*[m.to(dest) for m in self._specs], dim=self.dim)

    def clone(self) -> TensorSpec:
        """A deep copy."""
        return type(self)(*[m.clone() for m in self._specs], dim=self.dim)

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self)
            and other.dim == self.dim
            and len(other._specs) == len(self._specs)
            and all(a == b for a, b in zip(self._specs, other._specs, strict=True))
        )

    __hash__ = None  # type: ignore[assignment]

    def reshape(self, *shape: int | Sequence[int]) -> TensorSpec:
        """Reshape; only possible when all the members are identical.

        Raises:
            ValueError: if the members differ.
        """
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = tuple(shape[0])
        first = self._specs[0]
        if not all(m == first for m in self._specs):
            raise ValueError(
                f"{type(self).__name__}.reshape needs identical members to reshape the stack; "
                f"these differ (shape {tuple(self.shape)}). Reshape each member "
                f"(spec.unbind({self.dim})) instead."
            )
        return first.unsqueeze(self.dim).expand(self.shape).reshape(*shape)

    view = reshape

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> TensorSpec:
        """Flatten dims ``start_dim`` to ``end_dim`` (identical members only, see reshape)."""
        return self.reshape(_shape_after(self.shape, lambda t: t.flatten(start_dim, end_dim)))


class Stacked(_StackMixin, TensorSpec):
    """A lazy representation of a stack of tensor specs.

    ``torch.stack`` of leaf specs that differ (e.g. agents with different observation
    sizes) gives a ``Stacked``; its shape has ``-1`` where the members' sizes differ.
    Generated data is a dense stack when the members' shapes and dtypes agree, and a
    nested tensor otherwise. Members may be of different classes (envs with different
    action spaces in one pool); ``dtype`` and ``domain`` are then ``None`` and
    ``"mixed"`` where the members disagree.

    Args:
        *specs (TensorSpec): the members, of one rank and device.
        dim (int): the stack dim in the stacked shape.

    Raises:
        ValueError: if the members' ranks or devices differ.

    Examples:
        >>> import torch
        >>> from rl_specs import Bounded
        >>> spec = torch.stack([Bounded(-1, 1, shape=(3,)), Bounded(-2, 2, shape=(3,))], 0)
        >>> type(spec).__name__, spec.shape
        ('Stacked', torch.Size([2, 3]))
        >>> sample = spec.rand()
        >>> sample.shape, spec.is_in(sample), spec[1].high
        (torch.Size([2, 3]), True, tensor([2., 2., 2.]))
        >>> torch.stack([Bounded(-1, 1, shape=(2,)), Bounded(-1, 1, shape=(5,))]).shape
        torch.Size([2, -1])

        Multi-agent specs nest the per-agent stacks under ``"agents"`` (the example of
        the environment documentation, with three agents):

        >>> from rl_specs import Categorical, Composite, Unbounded
        >>> n_agents = 3
        >>> action_specs = []
        >>> observation_specs = []
        >>> reward_specs = []
        >>> for i in range(n_agents):
        ...     action_specs.append(Bounded(-1, 1, shape=(2,)))
        ...     reward_specs.append(Unbounded(shape=(1,)))
        ...     observation_specs.append(Unbounded(shape=(i + 2,)))
        >>> action_spec = Composite(
        ...     {
        ...         "agents": Composite(
        ...             {"action": torch.stack(action_specs)}, shape=(n_agents,)
        ...         )
        ...     }
        ... )
        >>> reward_spec = Composite(
        ...     {
        ...         "agents": Composite(
        ...             {"reward": torch.stack(reward_specs)}, shape=(n_agents,)
        ...         )
        ...     }
        ... )
        >>> observation_spec = Composite(
        ...     {
        ...         "agents": Composite(
        ...             {"observation": torch.stack(observation_specs)}, shape=(n_agents,)
        ...         )
        ...     }
        ... )
        >>> done_spec = Categorical(
        ...     n=2,
        ...     shape=torch.Size((1,)),
        ...     dtype=torch.bool,
        ... )
        >>> action_spec["agents", "action"].shape, reward_spec["agents", "reward"].shape
        (torch.Size([3, 2]), torch.Size([3, 1]))
        >>> observation_spec["agents", "observation"].shape
        torch.Size([3, -1])
        >>> reward_spec["agents", "reward"] == torch.stack(reward_specs)
        True
        >>> done_spec.rand().dtype
        torch.bool
    """

    def __init__(self, *specs: TensorSpec, dim: int) -> None:
        pos = _check_members(specs, dim, owner="Stacked")
        first = specs[0]
        dtypes = {spec.dtype for spec in specs}
        domains = {spec.domain for spec in specs}
        dtype = first.dtype if len(dtypes) == 1 else None
        domain = first.domain if len(domains) == 1 else "mixed"
        super().__init__(_merged_shape(specs, pos), None, first.device, dtype, domain)
        self._specs = list(specs)
        self.dim = pos

    def _member_data(self, shape: ShapeLike | None, method: str) -> torch.Tensor:
        lead = torch.Size([]) if shape is None else _as_shape(shape, owner=f"Stacked.{method}")
        if self.dtype is None:
            raise RuntimeError(
                f"Stacked.{method}() cannot build one tensor from members of dtypes "
                f"{[str(m.dtype) for m in self._specs]}. Call {method}() on each member "
                f"(spec.unbind({self.dim})), or on the enclosing StackedComposite, whose "
                "data is a lazy stack of the members' tensordicts."
            )
        values = [getattr(m, method)(lead) for m in self._specs]
        if len({v.shape for v in values}) == 1:
            return torch.stack(values, len(lead) + self.dim)
        if lead or self.dim:
            raise RuntimeError(
                f"Stacked.{method}() got members of shapes {[tuple(v.shape) for v in values]}, "
                "which only stack as a nested tensor along dim 0 with no leading shape. "
                f"Call {method}() on each member (spec.unbind({self.dim})) instead."
            )
        try:  # one ragged dim: the jagged layout torch recommends
            return torch.nested.as_nested_tensor(values, layout=torch.jagged)
        except (RuntimeError, ValueError):
            with warnings.catch_warnings():  # several ragged dims need the strided layout
                warnings.simplefilter("ignore", UserWarning)
                return torch.nested.as_nested_tensor(values)

    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        return self._member_data(shape, "rand")

    def zero(self, shape: ShapeLike | None = None) -> torch.Tensor:
        return self._member_data(shape, "zero")

    def one(self, shape: ShapeLike | None = None) -> torch.Tensor:
        return self._member_data(shape, "one")

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        lead = self._lead(val)
        parts = [
            m.project(v) for m, v in zip(self._specs, self._split_value(val, lead), strict=True)
        ]
        return torch.stack(parts, lead + self.dim)

    def encode(self, val: Any, *, ignore_device: bool = False) -> torch.Tensor:  # Any: array-like
        tensor = torch.as_tensor(val)
        parts = [
            m.encode(v, ignore_device=ignore_device)
            for m, v in zip(self._specs, tensor.unbind(self.dim), strict=True)
        ]
        return torch.stack(parts, self.dim)

    def __getitem__(self, index: Any) -> TensorSpec:  # Any: a tensor index
        return self._index_stack(index)

    def __repr__(self) -> str:
        inner = ",\n    ".join(repr(m) for m in self._specs)
        return f"Stacked(\n    {inner},\n    dim={self.dim}, shape={self.shape})"


class StackedComposite(_StackMixin, Composite):
    """A lazy representation of a stack of composite specs.

    Built by ``torch.stack`` on composites that differ. Keys present in every member
    are reached as usual (``spec["obs"]`` stacks the members' entries); keys present in
    only some members are *exclusive* and are not listed by :meth:`keys`. Generated data
    is a ``LazyStackedTensorDict`` holding every member's entries, exclusive ones included.

    Args:
        *specs (Composite): the members, of one batch rank and device.
        dim (int): the stack dim in the stacked batch shape.

    Raises:
        ValueError: if the members' batch ranks or devices differ.

    Examples:
        >>> import torch
        >>> from rl_specs import Composite, Unbounded
        >>> a = Composite(obs=Unbounded(shape=(3,)), extra=Unbounded(shape=(1,)))
        >>> b = Composite(obs=Unbounded(shape=(4,)))
        >>> spec = torch.stack([a, b], dim=0)
        >>> type(spec).__name__, spec.shape, list(spec.keys())
        ('StackedComposite', torch.Size([2]), ['obs'])
        >>> spec["obs"].shape
        torch.Size([2, -1])
        >>> data = spec.rand()
        >>> data[0]["extra"].shape, spec.is_in(data)
        (torch.Size([1]), True)
    """

    _fixed_shape = True

    def __init__(self, *specs: Composite, dim: int) -> None:
        batch_ndims = {len(s.shape) for s in specs}
        pos = _check_members(specs, dim, owner="StackedComposite")
        if not all(isinstance(s, Composite) for s in specs) or len(batch_ndims) != 1:
            raise TypeError(
                "StackedComposite expected Composite members of one batch rank, got "
                f"{[type(s).__name__ for s in specs]}. Use Stacked for leaf specs."
            )
        self._specs = list(specs)
        self.dim = pos
        self._shape = _merged_shape(specs, pos)
        self._device = next((s.device for s in specs if s.device is not None), None)
        self._locked = False
        self._lock_parents = []
        self.data_cls = None
        self.step_mdp_static = False
        self.space = None
        self.domain = "composite"

    @property
    def shape(self) -> torch.Size:
        """The stacked batch shape (read-only)."""
        return self._shape

    @property
    def device(self) -> torch.device | None:
        """The members' device (read-only)."""
        return self._device

    def _lock_children(self, recurse: bool) -> Iterator[Composite]:
        return iter(self._specs)  # a stack is locked through its members

    # ------------------------------------------------------------------ keys
    def _shared_keys(self) -> list[str]:
        first, *rest = self._specs
        return [k for k in first.keys() if all(k in m for m in rest)]

    def exclusive_keys(self) -> set[str]:
        """Top-level keys present in some members but not in all."""
        every = set().union(*(set(m.keys()) for m in self._specs))
        return every - set(self._shared_keys())

    def __getitem__(self, key: Any) -> Any:  # Any: a NestedKey or a tensor index
        if _is_key(key):
            parts = _split_key(key)
            missing = [i for i, m in enumerate(self._specs) if parts[0] not in m]
            if missing:
                raise KeyError(
                    f"Key {parts[0]!r} is missing from members {missing} of the "
                    f"StackedComposite (an exclusive key). Shared keys: {self._shared_keys()}. "
                    "Index a member (spec[i]) or use consolidate_spec(spec) first."
                )
            entry = _stack_members([m[parts[0]] for m in self._specs], self.dim)
            return entry[parts[1:]] if len(parts) > 1 else entry
        return self._index_stack(key)

    def __setitem__(self, key: NestedKey, value: TensorSpec | None) -> None:
        self._check_unlocked(f"key {key!r}")
        if value is None or isinstance(value, Mapping):
            parts = [value] * len(self._specs)
        else:
            parts = list(value.unbind(self.dim))
        if len(parts) != len(self._specs):
            raise ValueError(
                f"StackedComposite of {len(self._specs)} members expected a spec with that "
                f"size at dim {self.dim}, got shape {tuple(value.shape)}. Stack one spec per member."
            )
        for member, part in zip(self._specs, parts, strict=True):
            member[key] = part

    def __delitem__(self, key: NestedKey) -> None:
        """Delete ``key`` from every member that has it (an exclusive key too).

        Raises:
            KeyError: if no member has ``key``.
            RuntimeError: if the stack is locked.
        """
        self._check_unlocked(f"key {key!r}")
        holders = [member for member in self._specs if key in member]
        if not holders:
            raise KeyError(
                f"No member of the StackedComposite has key {key!r}. Shared keys: "
                f"{self._shared_keys()}; exclusive keys: {sorted(self.exclusive_keys())}."
            )
        for member in holders:
            del member[key]

    def __contains__(self, key: object) -> bool:
        return all(key in member for member in self._specs)

    def __len__(self) -> int:
        """The size of the first dim, as for the lazily stacked tensordicts it generates."""
        return self._shape[0]

    def __iter__(self) -> Iterator[str]:
        return iter(self._shared_keys())

    def _entries(self) -> Iterator[tuple[str, TensorSpec | None]]:
        return ((key, self[key]) for key in self._shared_keys())

    def empty(self) -> StackedComposite:
        return StackedComposite(*[m.empty() for m in self._specs], dim=self.dim)

    def exclude(self, *keys: NestedKey) -> StackedComposite:
        return StackedComposite(*[m.exclude(*keys) for m in self._specs], dim=self.dim)

    def is_empty(self, recurse: bool = False) -> bool:
        return all(m.is_empty(recurse) for m in self._specs)

    # ------------------------------------------------------------------ data
    def _generate(self, shape: ShapeLike | None, method: str) -> TensorDictBase:
        lead = torch.Size([]) if shape is None else _as_shape(shape, owner=method)
        parts = [getattr(m, method)(lead) for m in self._specs]
        return LazyStackedTensorDict.lazy_stack(parts, len(lead) + self.dim)

    def _build(self, shape: torch.Size, method: str) -> TensorDictBase:
        return self._generate(shape, method)

    def is_in(self, val: Any) -> bool:  # Any: a tensordict
        return _StackMixin.is_in(self, val)

    def project(self, val: TensorDictBase) -> TensorDictBase:
        lead = self._lead(val)
        parts = [
            m.project(v) for m, v in zip(self._specs, self._split_value(val, lead), strict=True)
        ]
        return LazyStackedTensorDict.lazy_stack(parts, lead + self.dim)

    def encode(self, vals: Mapping[str, Any], *, ignore_device: bool = False) -> TensorDictBase:
        parts = [
            m.encode(_take(vals, self.dim, i), ignore_device=ignore_device)
            for i, m in enumerate(self._specs)
        ]
        return LazyStackedTensorDict.lazy_stack(parts, self.dim)

    def __repr__(self) -> str:
        inner = ",\n".join(repr(m) for m in self._specs).replace("\n", "\n    ")
        return f"StackedComposite(\n    {inner},\n    dim={self.dim}, shape={self.shape})"


def _take(vals: Mapping[str, Any], dim: int, i: int) -> dict[str, Any]:
    """Element ``i`` along ``dim`` of every (nested) value of ``vals``."""
    return {
        k: _take(v, dim, i) if isinstance(v, Mapping) else torch.as_tensor(v).select(dim, i)
        for k, v in vals.items()
    }
