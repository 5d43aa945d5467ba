"""Leaf keys of a tensordict, non-tensor entries (strings, objects) included."""

from __future__ import annotations

from tensordict import NonTensorData, NonTensorStack, TensorDictBase
from tensordict.utils import NestedKey

__all__ = ["as_tuple", "is_leaf", "leaf_keys"]


def is_leaf(cls: type) -> bool:
    """Leaf test for ``keys(is_leaf=...)``: tensors and non-tensor entries, not sub-tensordicts."""
    return not issubclass(cls, TensorDictBase) or issubclass(cls, (NonTensorData, NonTensorStack))


def as_tuple(key: NestedKey) -> tuple[str, ...]:
    return key if isinstance(key, tuple) else (key,)


def leaf_keys(tensordict: TensorDictBase) -> list[tuple[str, ...]]:
    """Every leaf key of ``tensordict`` as a tuple, in insertion order."""
    return [as_tuple(k) for k in tensordict.keys(True, True, is_leaf=is_leaf)]
