"""The :class:`Composite` spec: a tree of specs keyed by strings, with a shared batch shape."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
from tensordict import NestedKey, unravel_key

from ._base import (
    DeviceLike,
    ShapeLike,
    TensorSpec,
    _as_device,
    _as_shape,
    _expand_target,
    _unbind_at,
)
from ._composite_data import _CompositeDataMixin
from ._indexing import _checked_index, _normalize_index
from ._keys import _CompositeKeysView, _is_key, _split_key
from ._lock import _LockableMixin
from ._non_tensor import NonTensor
from ._shapes import _pos_dim, _shape_after

_EMPTY = torch.Size([])


def _leading_match(child: torch.Size, batch: torch.Size) -> bool:
    if len(child) < len(batch):
        return False
    return all(b == -1 or c == -1 or b == c for b, c in zip(batch, child, strict=False))


class Composite(_LockableMixin, _CompositeDataMixin, TensorSpec):
    """A composition of TensorSpecs, keyed by strings, sharing the batch dims ``shape``.

    Entries can be leaf specs, nested ``Composite`` s (plain dicts are turned into ones)
    or ``None``. Nested entries are reached with tuple keys (``spec["a", "b"]``); setting
    a nested key creates the missing intermediate composites with this batch shape.
    :meth:`rand`, :meth:`zero`, :meth:`one`, :meth:`is_in`, :meth:`project` and
    :meth:`encode` work over the whole tree and return TensorDicts of batch size ``shape``.

    Args:
        *args (dict, optional): one mapping of key to spec.
        shape (torch.Size, optional): the batch dims, a prefix of every entry's shape.
            Defaults to ``torch.Size([])``.
        device (torch.device, optional): the device of every entry; entries built on the
            default device are moved to it. Defaults to ``None`` (entries may live anywhere).
        data_cls (type, optional): a tensorclass built from generated data with
            ``data_cls.from_tensordict``. Defaults to ``None`` (a ``TensorDict``).
        step_mdp_static (bool, optional): whether ``step_mdp`` should leave the entries
            untouched. Defaults to ``False``.
        **kwargs (TensorSpec): more key-spec pairs.

    Raises:
        TypeError: if a key is not a string or an entry is not a spec.
        ValueError: if an entry's shape does not start with ``shape`` or its device
            differs from ``device``.
        RuntimeError: if a locked composite is modified.

    Examples:
        >>> import torch
        >>> from rl_specs import Bounded, Categorical, Unbounded
        >>> spec = Composite(
        ...     observation=Unbounded(shape=(8, 3)),
        ...     action=Bounded(low=-1, high=1, shape=(8, 2)),
        ...     shape=(8,),
        ... )
        >>> spec[("next", "reward")] = Unbounded(shape=(8, 1))
        >>> spec["next"].shape
        torch.Size([8])
        >>> sorted(spec.keys(include_nested=True, leaves_only=True), key=str)
        [('next', 'reward'), 'action', 'observation']
        >>> data = spec.rand()
        >>> data.batch_size, data["next", "reward"].shape
        (torch.Size([8]), torch.Size([8, 1]))
        >>> spec.is_in(data)
        True
        >>> spec.lock_().is_locked
        True
        >>> spec["done"] = Categorical(2, shape=(8, 1), dtype=torch.bool)
        Traceback (most recent call last):
        ...
        RuntimeError: Cannot set key 'done': the Composite is locked. ...

        The specs of the dynamic-spec environment of the documentation: the observation
        has a dynamic (``-1``) dim, so only its done entries can be generated:

        >>> from rl_specs import Binary
        >>> observation_spec = Composite(
        ...     observation=Unbounded(shape=(3, -1, 2)),
        ... )
        >>> action_spec = Bounded(low=-1, high=1, shape=(2,))
        >>> full_done_spec = Composite(
        ...     done=Binary(1, shape=(1,), dtype=torch.bool),
        ...     terminated=Binary(1, shape=(1,), dtype=torch.bool),
        ...     truncated=Binary(1, shape=(1,), dtype=torch.bool),
        ... )
        >>> reward_spec = Unbounded((1,), dtype=torch.float)
        >>> observation_spec["observation"].is_dynamic, action_spec.shape
        (True, torch.Size([2]))
        >>> done = full_done_spec.zero() | True
        >>> done["terminated"], reward_spec.zero()
        (tensor([True]), tensor([0.]))
    """

    _event_ndim = 0
    #: whether the batch shape is read-only (lazy stacks), so parents leave it alone
    _fixed_shape = False

    def __init__(
        self,
        *args: Mapping[str, Any],
        shape: ShapeLike | None = None,
        device: DeviceLike = None,
        data_cls: type | None = None,
        step_mdp_static: bool = False,
        **kwargs: TensorSpec | None,
    ) -> None:
        if len(args) > 1:
            raise TypeError(
                f"Composite takes at most one positional mapping of specs, got {len(args)} "
                "positional arguments. Merge them into one dict or pass key=spec pairs."
            )
        self._specs: dict[str, TensorSpec | None] = {}
        self._locked = False
        self._lock_parents = []
        self._shape = _as_shape(shape, owner="Composite")
        self._device = _as_device(device)
        self.data_cls = data_cls
        self.step_mdp_static = step_mdp_static
        self.space = None
        self.domain = "composite"
        entries = dict(args[0]) if args else {}
        entries.update(kwargs)
        for key, value in entries.items():
            self[key] = value

    # ------------------------------------------------------------------ attributes
    @property
    def shape(self) -> torch.Size:
        """The batch dims shared by every entry."""
        return self._shape

    @shape.setter
    def shape(self, value: ShapeLike) -> None:
        new = _as_shape(value, owner="Composite")
        self._check_unlocked("shape")
        self._check_batch_shape(new)  # every entry is checked before any changes
        self._set_batch_shape(new)

    @staticmethod
    def _takes_shape(spec: TensorSpec) -> bool:
        """Whether ``spec`` is a nested composite that follows a batch-shape change."""
        return isinstance(spec, Composite) and not spec._fixed_shape

    def _check_batch_shape(self, new: torch.Size) -> None:
        for key, spec in self._specs.items():
            if spec is None or _leading_match(spec.shape, new):
                continue
            if self._takes_shape(spec):
                spec._check_unlocked(f"the shape of the nested entry {key!r}")
                spec._check_batch_shape(new)
                continue
            raise ValueError(
                f"Composite cannot take batch shape {tuple(new)}: entry {key!r} has shape "
                f"{tuple(spec.shape)}, which does not start with it. Reshape the entry first."
            )

    def _set_batch_shape(self, new: torch.Size) -> None:
        for spec in self._specs.values():
            if spec is not None and not _leading_match(spec.shape, new):
                spec._set_batch_shape(new)  # a nested composite, checked to take it
        self._shape = new

    @property
    def device(self) -> torch.device | None:
        """The device of every entry (``None`` when unconstrained)."""
        return self._device

    @device.setter
    def device(self, value: DeviceLike) -> None:
        device = _as_device(value)
        if device is not None:
            for key, spec in self._specs.items():
                if spec is not None:
                    self._specs[key] = spec.to(device)
        self._device = device

    @property
    def is_dynamic(self) -> bool:
        """Whether a batch dim or any entry's dim is ``-1`` (data cannot be preallocated).

        Examples:
            >>> from rl_specs import Unbounded
            >>> Composite(obs=Unbounded(shape=(3, -1, 2))).is_dynamic
            True
        """
        return -1 in self.shape or any(
            spec.is_dynamic for spec in self.values() if spec is not None
        )

    def clear_device_(self) -> Composite:
        """Drop the device constraint (entries keep theirs), here and in nested composites."""
        self._device = None
        for spec in self._specs.values():
            if isinstance(spec, Composite):
                spec.clear_device_()
        return self

    def _lock_children(self, recurse: bool) -> Iterator[Composite]:
        if recurse:
            yield from (spec for spec in self._specs.values() if isinstance(spec, Composite))

    # ------------------------------------------------------------------ dict API
    def _missing(self, key: NestedKey) -> str:
        available = sorted(self.keys(include_nested=True), key=str)
        return f"No spec at key {key!r}. Available keys: {available}."

    def __getitem__(self, key: Any) -> Any:  # Any: a NestedKey or a tensor index
        if isinstance(key, str):
            try:
                return self._specs[key]
            except KeyError:
                raise KeyError(self._missing(key)) from None
        if _is_key(key):
            parts = _split_key(key)
            node = self[parts[0]]
            if len(parts) == 1:
                return node
            if not isinstance(node, Composite):
                raise KeyError(self._through_leaf(key, parts[0], node))
            return node[parts[1:]]
        return self._index(key)

    def get(self, key: NestedKey, default: Any = None) -> Any:  # Any: any default
        """Return the entry at ``key``, or ``default`` when there is none."""
        try:
            return self[key]
        except KeyError:
            return default

    def __setitem__(self, key: NestedKey, value: TensorSpec | Mapping | None) -> None:
        parts = _split_key(key)
        if len(parts) == 1:
            self._set_direct(parts[0], value)
            return
        node = self._specs.get(parts[0])
        if node is None:
            self._check_unlocked(f"key {key!r}")
            node = self._specs[parts[0]] = Composite(shape=self._shape, device=self._device)
        if not isinstance(node, Composite):
            raise KeyError(self._through_leaf(key, parts[0], node))
        node[parts[1:]] = value

    def _through_leaf(self, key: NestedKey, part: str, node: Any) -> str:  # Any: an entry
        return (
            f"Key {key!r} goes through {part!r}, which is a {type(node).__name__}, not a "
            "Composite. Use a key that stops there, or replace the entry with a Composite."
        )

    def _set_direct(self, key: str, value: Any) -> None:  # Any: validated here
        self._check_unlocked(f"key {key!r}")
        if isinstance(value, Mapping) and not isinstance(value, TensorSpec):
            value = Composite(value, shape=self._shape, device=self._device)
        if value is not None:
            if not isinstance(value, TensorSpec):
                raise TypeError(
                    f"Composite expected a TensorSpec, a dict of specs or None at key {key!r}, "
                    f"got {type(value).__name__}. Wrap the value in a spec, e.g. Unbounded(...)."
                )
            if not _leading_match(value.shape, self._shape):
                value = self._adopted(key, value)
            if self._device is not None and value.device != self._device:
                value = self._moved_here(key, value)
        self._specs[key] = value

    def _adopted(self, key: str, value: TensorSpec) -> TensorSpec:
        """A copy of ``value`` with this batch shape, when its shape is a prefix of it.

        A nested composite (or a non-tensor spec) built without the batch dims, e.g.
        ``Composite(a=Composite(b=leaf), shape=(4,))``, takes the parent's batch shape;
        the copy is adjusted, never the spec that was passed.

        Raises:
            ValueError: if ``value``'s shape neither starts with the batch shape nor is a
                prefix of it (or ``value`` is a tensor leaf, which keeps its shape).
        """
        if value.ndim < self.ndim and self._shape[: value.ndim] == value.shape:
            if self._takes_shape(value):
                value = value.clone()
                value.shape = self._shape
                return value
            if isinstance(value, NonTensor):
                return value._rebuild(self._shape, {})
        raise ValueError(
            f"Composite of batch shape {tuple(self._shape)} expected the spec at key "
            f"{key!r} to have a shape starting with it, got {tuple(value.shape)}. "
            f"Use shape=({', '.join(map(str, self._shape))}, ...) for the entry."
        )

    def _moved_here(self, key: str, value: TensorSpec) -> TensorSpec:
        """``value`` on this composite's device, if it came from the default device.

        Raises:
            ValueError: if ``value`` was placed on another, non-default device.
        """
        if value.device is None or value.device == torch.get_default_device():
            return value.to(self._device)
        raise ValueError(
            f"Composite on device {self._device} got a spec on device {value.device} at key "
            f"{key!r}. Move it with spec.to({str(self._device)!r}) first."
        )

    def set(self, name: NestedKey, spec: TensorSpec | None) -> Composite:
        """Set ``spec`` at ``name`` (nested keys create intermediate composites); returns self."""
        self[name] = spec
        return self

    def __delitem__(self, key: NestedKey) -> None:
        parts = _split_key(key)
        if len(parts) > 1:
            node = self[parts[:-1]]
            if not isinstance(node, Composite):
                raise KeyError(self._through_leaf(key, parts[-2], node))
            del node[parts[-1]]
            return
        self._check_unlocked(f"key {key!r}")
        if parts[0] not in self._specs:
            raise KeyError(self._missing(key))
        del self._specs[parts[0]]

    def pop(self, key: NestedKey, default: Any = ...) -> Any:  # Any: any default
        """Remove and return the entry at ``key`` (``default`` if given and it is missing)."""
        if key not in self:
            if default is ...:
                raise KeyError(self._missing(key))
            return default
        out = self[key]
        del self[key]
        return out

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            return key in self._specs
        try:
            parts = _split_key(key)
        except TypeError:
            return False
        node = self._specs.get(parts[0])
        if len(parts) == 1:
            return parts[0] in self._specs
        return isinstance(node, Composite) and parts[1:] in node

    def __len__(self) -> int:
        return len(self._specs)

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def _entries(self) -> Iterator[tuple[str, TensorSpec | None]]:
        """The top-level key-spec pairs (a lazy stack lists its shared keys)."""
        return iter(self._specs.items())

    def _iter_items(
        self,
        include_nested: bool,
        leaves_only: bool,
        is_leaf: Callable[[type], bool] | None,
        prefix: tuple[str, ...] = (),
    ) -> Iterator[tuple[NestedKey, TensorSpec | None]]:
        # nested entries come before the composite holding them, so that deleting the
        # keys in this order never deletes a key twice
        for key, spec in self._entries():
            full = (*prefix, key)
            leaf = not isinstance(spec, Composite) if is_leaf is None else is_leaf(type(spec))
            if include_nested and isinstance(spec, Composite) and not leaf:
                yield from spec._iter_items(include_nested, leaves_only, is_leaf, full)
            if leaf or not leaves_only:
                yield (full if prefix else key), spec

    def keys(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        *,
        is_leaf: Callable[[type], bool] | None = None,
    ) -> _CompositeKeysView:
        """The keys, as a view (tuple keys for nested entries when ``include_nested``).

        Args:
            include_nested (bool, optional): walk into nested composites. Defaults to ``False``.
            leaves_only (bool, optional): skip the composites themselves. Defaults to ``False``.

        Keyword Args:
            is_leaf (callable, optional): takes an entry's type and says whether it is a leaf.
                Defaults to ``None`` (every non-composite is a leaf).
        """
        return _CompositeKeysView(self, include_nested, leaves_only, is_leaf)

    def items(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        *,
        is_leaf: Callable[[type], bool] | None = None,
    ) -> Iterator[tuple[NestedKey, TensorSpec | None]]:
        """Key-spec pairs, with the same options as :meth:`keys`."""
        return self._iter_items(include_nested, leaves_only, is_leaf)

    def values(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        *,
        is_leaf: Callable[[type], bool] | None = None,
    ) -> Iterator[TensorSpec | None]:
        """The entries, with the same options as :meth:`keys`."""
        return (spec for _, spec in self._iter_items(include_nested, leaves_only, is_leaf))

    def update(self, dict_or_spec: Composite | Mapping[NestedKey, Any]) -> Composite:
        """Merge entries into this composite (nested composites are merged, not replaced)."""
        for key, value in dict_or_spec.items():
            current = self.get(key)
            if isinstance(current, Composite) and isinstance(value, Composite):
                current.update(value)
            else:
                self[key] = value
        return self

    def empty(self) -> Composite:
        """A composite with the same batch shape, device and options but no entries."""
        return Composite(
            shape=self._shape,
            device=self._device,
            data_cls=self.data_cls,
            step_mdp_static=self.step_mdp_static,
        )

    def select(self, *keys: NestedKey, strict: bool = True) -> Composite:
        """A composite holding only ``keys`` (entries are shared, not copied).

        Raises:
            KeyError: if ``strict`` and some key is missing.
        """
        out = self.empty()
        for key in keys:
            if key in self:
                out[key] = self[key]
            elif strict:
                raise KeyError(self._missing(key))
        return out

    def exclude(self, *keys: NestedKey) -> Composite:
        """A composite without ``keys`` (entries are shared, not copied)."""
        out = self.empty()
        drop = {unravel_key(k) for k in keys}
        for key, spec in self._specs.items():
            if key in drop:
                continue
            nested = [k[1:] for k in drop if isinstance(k, tuple) and k[0] == key]
            if nested and isinstance(spec, Composite):
                spec = spec.exclude(*nested)
            out._specs[key] = spec
        return out

    def is_empty(self, recurse: bool = False) -> bool:
        """Whether there is no entry (``recurse``: no leaf in any nested composite)."""
        if not recurse:
            return not self._specs
        return all(
            isinstance(spec, Composite) and spec.is_empty(recurse=True)
            for spec in self._specs.values()
        )

    # ------------------------------------------------------------------ shape ops, copies
    def _map(
        self, fn: Callable[[TensorSpec], TensorSpec], shape: torch.Size, **overrides: Any
    ) -> Composite:
        out = Composite(
            shape=shape,
            device=overrides.get("device", self._device),
            data_cls=self.data_cls,
            step_mdp_static=self.step_mdp_static,
        )
        out._specs = {k: None if v is None else fn(v) for k, v in self._specs.items()}
        return out

    def _index(self, index: Any) -> Composite:  # Any: any tensor index
        checked, _ = _checked_index(index, self._shape, owner="Composite")
        idx = _normalize_index(index, self.ndim, owner="Composite")  # entries check it too
        return self._map(lambda s: s[idx], _shape_after(self._shape, lambda t: t[checked]))

    def expand(self, *shape: int | ShapeLike) -> Composite:
        """Expand the batch dims to ``shape`` (which must end with the current batch dims).

        Raises:
            ValueError: if ``shape`` does not end with the batch shape.
        """
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = tuple(shape[0])
        new = _expand_target(self._shape, shape, owner="Composite")
        return self._map(lambda s: s.expand(*new, *s.shape[self.ndim :]), new)

    def squeeze(self, dim: int | None = None) -> Composite:
        """Remove the size-1 batch dim ``dim`` (all of them when ``dim`` is ``None``)."""
        if dim is None:
            dims = [i for i, d in enumerate(self._shape) if d == 1]
        else:
            dims = [_pos_dim(dim, self.ndim, owner="Composite.squeeze")]
            dims = [d for d in dims if self._shape[d] == 1]
        out = self
        for d in sorted(dims, reverse=True):
            out = out._map(lambda s, d=d: s.squeeze(d), out._shape[:d] + out._shape[d + 1 :])
        return out if dims else self.clone()

    def unsqueeze(self, dim: int) -> Composite:
        """Insert a size-1 batch dim at ``dim``."""
        pos = _pos_dim(dim, self.ndim + 1, owner="Composite.unsqueeze")
        shape = self._shape[:pos] + torch.Size([1]) + self._shape[pos:]
        return self._map(lambda s: s.unsqueeze(pos), shape)

    def reshape(self, *shape: int | ShapeLike) -> Composite:
        """Reshape the batch dims (entries keep their trailing dims)."""
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = tuple(shape[0])
        new = _shape_after(self._shape, lambda t: t.reshape(shape))
        return self._map(lambda s: s.reshape(*new, *s.shape[self.ndim :]), new)

    view = reshape

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Composite:
        """Flatten the batch dims ``start_dim`` to ``end_dim``."""
        new = _shape_after(self._shape, lambda t: t.flatten(start_dim, end_dim))
        return self.reshape(new)

    def unbind(self, dim: int = 0) -> tuple[Composite, ...]:
        """Split along batch dim ``dim`` into a tuple of composites.

        Raises:
            ValueError: if the dim is dynamic (``-1``).
        """
        return _unbind_at(self, _pos_dim(dim, self.ndim, owner="Composite.unbind"))

    @property
    def dtype(self) -> torch.dtype | None:
        """The dtype every leaf shares; ``None`` when they differ or there is no leaf.

        Examples:
            >>> import torch
            >>> from rl_specs import Unbounded
            >>> Composite(a=Unbounded(1), b=Composite(c=Unbounded(2))).dtype
            torch.float32
            >>> print(Composite(a=Unbounded(1), b=Unbounded(1, dtype=torch.int64)).dtype)
            None
        """
        found = {leaf.dtype for leaf in self.values(True, True) if leaf is not None}
        return found.pop() if len(found) == 1 else None

    def to(self, dest: DeviceLike | torch.dtype) -> Composite:
        """Move every entry to a device (or cast every leaf to a dtype)."""
        if isinstance(dest, torch.dtype):
            return self._map(lambda s: s.to(dest), self._shape)
        device = _as_device(dest)
        if device == self._device:
            return self
        return self._map(lambda s: s.to(device), self._shape, device=device)

    def clone(self) -> Composite:
        """A deep copy (unlocked)."""
        return self._map(lambda s: s.clone(), self._shape)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return False
        return (
            self._shape == other._shape
            and self._device == other._device
            and self._specs.keys() == other._specs.keys()
            and all(spec == other._specs[key] for key, spec in self._specs.items())
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__}("]
        for key, spec in self._specs.items():
            body = repr(spec).replace("\n", "\n    ")
            lines.append(f"    {key}: {body},")
        lines.append(f"    device={self._device},")
        lines.append(f"    shape={self._shape})")
        return "\n".join(lines)
