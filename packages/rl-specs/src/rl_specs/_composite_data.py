"""Data over a :class:`~rl_specs.Composite` tree: generation, checks and conversions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from tensordict import NestedKey, TensorDict, TensorDictBase

from ._base import ShapeLike, _as_shape
from ._shapes import _drawn_shape
from ._td import new_unchecked

_EMPTY = torch.Size([])


class _CompositeDataMixin:
    """The value-level methods of ``Composite``: they walk ``self._specs`` once per level."""

    _specs: dict
    _shape: torch.Size
    _device: torch.device | None
    data_cls: type | None

    def _build(self, shape: torch.Size, method: str) -> TensorDictBase:
        composite_cls = type(self)
        source = {}
        for key, spec in self._specs.items():
            if spec is None:
                continue
            if type(spec) is composite_cls:
                source[key] = spec._build(shape, method)
            else:
                source[key] = getattr(spec, method)(shape)
        batch = shape + self._shape
        if -1 in batch:  # the entries drew their dynamic dims at size 1
            batch = _drawn_shape(batch)
        out = new_unchecked(source, batch, self._device)
        return out if self.data_cls is None else self.data_cls.from_tensordict(out)

    def _generate(self, shape: ShapeLike | None, method: str) -> TensorDictBase:
        shape = _EMPTY if shape is None else _as_shape(shape, owner=f"Composite.{method}")
        return self._build(shape, method)

    def rand(self, shape: ShapeLike | None = None) -> TensorDictBase:
        """Random data for every entry, as a TensorDict of batch size ``(*shape, *self.shape)``."""
        return self._generate(shape, "rand")

    def zero(self, shape: ShapeLike | None = None) -> TensorDictBase:
        """Zeros for every entry, as a TensorDict of batch size ``(*shape, *self.shape)``."""
        return self._generate(shape, "zero")

    def one(self, shape: ShapeLike | None = None) -> TensorDictBase:
        """Ones for every entry, as a TensorDict of batch size ``(*shape, *self.shape)``."""
        return self._generate(shape, "one")

    def cardinality(self) -> int:
        """The number of distinct samples: the product of the leaves' cardinalities.

        Raises:
            TypeError: if a leaf has no finite cardinality (e.g. a continuous spec).

        Examples:
            >>> from rl_specs import Binary, Categorical, Composite
            >>> Composite(a=Categorical(3), b=Binary(2)).cardinality()
            12
        """
        total = 1
        for key, spec in self.items(include_nested=True, leaves_only=True):
            if spec is None:
                continue
            if not hasattr(spec, "cardinality"):
                raise TypeError(
                    f"Composite.cardinality needs discrete leaves, but {key!r} is a "
                    f"{type(spec).__name__} with no finite cardinality. Exclude it first "
                    "with spec.exclude(key)."
                )
            total *= spec.cardinality()
        return total

    def is_in(self, val: TensorDictBase | Mapping) -> bool:
        """Whether every entry of ``val`` belongs to its spec.

        Raises:
            KeyError: if ``val`` lacks an entry of the spec (``None`` entries and empty
                nested composites need none).
        """
        for key, spec in self._specs.items():
            if spec is None:
                continue
            item = val.get(key, None)
            if item is None:
                if isinstance(spec, _CompositeDataMixin) and spec.is_empty():
                    continue
                raise KeyError(
                    f"Composite.is_in expected key {key!r} in the value, which has keys "
                    f"{sorted(map(str, val.keys()))}. Add the entry or check a "
                    "spec.select(...) of the keys you have."
                )
            if not spec.is_in(item):
                return False
        return True

    def assert_is_in(self, value: TensorDictBase | Mapping) -> None:
        """Raise an error naming the first key whose value does not belong to its spec.

        Raises:
            KeyError: if an entry of the spec is missing from ``value``.
            TypeError, ValueError: as the entry's spec raises them.
        """
        for key, spec in self._specs.items():
            if spec is None:
                continue
            item = value.get(key, None)
            if item is None:
                raise KeyError(
                    f"Composite expected key {key!r} in the value, which has keys "
                    f"{sorted(map(str, value.keys()))}. Add the entry."
                )
            try:
                spec.assert_is_in(item)
            except (TypeError, ValueError) as err:
                raise type(err)(f"At key {key!r}: {err}") from err

    def type_check(
        self,
        value: TensorDictBase | torch.Tensor,
        selected_keys: NestedKey | Sequence[NestedKey] | None = None,
    ) -> None:
        """Check the dtypes of the entries of ``value`` (all of them, or ``selected_keys``).

        Args:
            value (TensorDictBase or torch.Tensor): the data to check. A tensor is the
                value of the single entry ``selected_keys``.
            selected_keys (NestedKey or sequence of NestedKey, optional): the entries to
                check. Defaults to ``None`` (every entry of the spec present in ``value``).

        Raises:
            TypeError: if an entry has the wrong dtype, or ``value`` is a tensor and
                ``selected_keys`` is not one key.

        Examples:
            >>> import torch
            >>> from rl_specs import Composite, Unbounded
            >>> spec = Composite(obs=Unbounded(shape=(3,)))
            >>> spec.type_check(torch.zeros(3), "obs")
            >>> spec.type_check(torch.zeros(3, dtype=torch.int64), "obs")
            Traceback (most recent call last):
            ...
            TypeError: UnboundedContinuous at key 'obs' expected dtype torch.float32, ...
        """
        one_key = isinstance(selected_keys, (str, tuple))
        if isinstance(value, torch.Tensor):
            if not one_key:
                raise TypeError(
                    "Composite.type_check got a tensor, which is the value of one entry, with "
                    f"selected_keys={selected_keys!r}. Pass the entry's key, e.g. "
                    "spec.type_check(value, 'obs'), or pass a TensorDict."
                )
            spec = self[selected_keys]
            if spec is not None:
                spec.type_check(value, selected_keys)
            return
        if selected_keys is None:
            keys = list(self._specs)
        else:
            keys = [selected_keys] if one_key else list(selected_keys)
        for key in keys:
            spec = self[key]
            item = None if spec is None else value.get(key, None)
            if item is None:
                continue
            if isinstance(item, TensorDictBase):  # a nested composite checks all its entries
                spec.type_check(item)
            else:
                spec.type_check(item, key)

    def project(self, val: TensorDictBase) -> TensorDictBase:
        """Project, in place, every entry of ``val`` that is outside its spec; returns ``val``."""
        for key, spec in self._specs.items():
            if spec is None:
                continue
            item = val.get(key, None)
            if item is not None and not spec.is_in(item):
                val.set(key, spec.project(item))
        return val

    def encode(self, vals: Mapping[str, Any], *, ignore_device: bool = False) -> TensorDictBase:
        """Build a TensorDict from a (nested) mapping of numpy arrays or python values.

        Raises:
            KeyError: if ``vals`` has a key the spec does not know.

        Examples:
            >>> import numpy as np
            >>> from rl_specs import Composite, Unbounded
            >>> spec = Composite(obs=Unbounded(shape=(3,)))
            >>> spec.encode({"obs": np.zeros(3)})["obs"]
            tensor([0., 0., 0.])
        """
        source = {}
        for key, val in vals.items():
            spec = self._specs.get(key, ...)
            if spec is ...:
                raise KeyError(
                    f"Composite.encode got key {key!r}, unknown to the spec. Known keys: "
                    f"{sorted(self._specs)}. Add a spec for it or drop the entry."
                )
            if spec is not None:
                source[key] = spec.encode(val, ignore_device=ignore_device)
        return TensorDict(source, batch_size=self._shape, device=self._device)

    def to_numpy(self, val: TensorDictBase, safe: bool | None = None) -> dict[str, Any]:
        """A (nested) dict of numpy arrays built from ``val``."""
        return {
            key: spec.to_numpy(val.get(key), safe=safe)
            for key, spec in self._specs.items()
            if spec is not None and key in val.keys()
        }
