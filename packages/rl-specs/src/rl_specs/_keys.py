"""Key helpers for :class:`~rl_specs.Composite`: nested-key splitting and the keys view."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from tensordict import NestedKey, unravel_key

if TYPE_CHECKING:
    from ._composite import Composite


def _split_key(key: Any) -> tuple[str, ...]:  # Any: validated here
    """A nested key as a flat tuple of strings.

    Raises:
        TypeError: if the key is not a string or a (nested) tuple of strings.
    """
    if isinstance(key, str):
        return (key,)
    try:
        flat = unravel_key(key)
    except (TypeError, ValueError, RuntimeError):
        flat = None
    if flat is None or (isinstance(flat, tuple) and not all(isinstance(k, str) for k in flat)):
        raise TypeError(
            f"Composite keys are strings or tuples of strings, got {key!r} of type "
            f"{type(key).__name__}. Use e.g. 'obs' or ('agents', 'obs')."
        )
    if isinstance(flat, str):
        return (flat,)
    if not flat:
        raise TypeError("Composite got an empty tuple key. Use e.g. 'obs' or ('agents', 'obs').")
    return flat


def _is_key(index: Any) -> bool:  # Any: a key or a tensor index
    """Whether ``index`` is a (nested) key: a string or a non-empty tuple of keys."""
    if isinstance(index, str):
        return True
    return isinstance(index, tuple) and bool(index) and all(_is_key(i) for i in index)


class _CompositeKeysView:
    """The keys of a :class:`Composite`, re-read from the spec at each iteration."""

    def __init__(
        self,
        spec: Composite,
        include_nested: bool,
        leaves_only: bool,
        is_leaf: Callable[[type], bool] | None,
    ) -> None:
        self._spec = spec
        self._args = (include_nested, leaves_only, is_leaf)

    def __iter__(self) -> Iterator[NestedKey]:
        for key, _ in self._spec._iter_items(*self._args):
            yield key

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, key: object) -> bool:
        try:
            key = unravel_key(key)
        except (TypeError, ValueError, RuntimeError):
            return False
        return any(k == key for k in self)

    def __eq__(self, other: object) -> bool:
        try:
            return set(self) == set(other)  # type: ignore[arg-type]
        except TypeError:
            return False

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"_CompositeKeysView({list(self)})"
