"""The transform protocol of replay buffers and the internal ordered list of transforms.

A transform is any callable on the sampled data.  If it also has an ``inv``
method, ``inv`` is applied to the data on its way *into* the buffer (in reverse
order).  rl-transforms' ``Transform`` objects follow this protocol; rl-replay
never imports them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

__all__ = ["BufferTransform", "_TransformList"]


@runtime_checkable
class BufferTransform(Protocol):
    """What a replay-buffer transform is: a callable, optionally with an ``inv``."""

    def __call__(self, data: Any) -> Any:  # Any: a tensordict or whatever the buffer holds
        ...


class _Inverted:
    """Swap the forward and inverse passes of a transform (``invert=True``)."""

    def __init__(self, transform: Any) -> None:
        self.transform = transform

    def __call__(self, data: Any) -> Any:
        inv = getattr(self.transform, "inv", None)
        return data if inv is None else inv(data)

    def inv(self, data: Any) -> Any:
        return self.transform(data)


class _TransformList:
    """An ordered list of transforms applied in order on read and inverted on write."""

    def __init__(self, transform: Callable[[Any], Any] | None = None) -> None:
        self._items: list[Any] = []
        self._inverses: list[Callable[[Any], Any]] = []
        if transform is not None:
            self.append(transform)

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, index: int) -> Any:
        return self._items[index]

    def _check(self, transform: Any) -> None:
        if not callable(transform):
            raise TypeError(
                f"A replay-buffer transform must be callable on the data, got "
                f"{type(transform).__name__}. Pass a function or an object with __call__ (and "
                "optionally inv)."
            )

    def append(self, transform: Any, invert: bool = False) -> None:
        self.insert(len(self._items), transform, invert)

    def insert(self, index: int, transform: Any, invert: bool = False) -> None:
        self._check(transform)
        self._items.insert(index, _Inverted(transform) if invert else transform)
        self._refresh()

    def _refresh(self) -> None:
        self._inverses = [t.inv for t in reversed(self._items) if callable(getattr(t, "inv", None))]

    def __call__(self, data: Any) -> Any:
        for transform in self._items:
            data = transform(data)
        return data

    def inv(self, data: Any) -> Any:
        for inverse in self._inverses:
            data = inverse(data)
        return data

    @property
    def has_inv(self) -> bool:
        return bool(self._inverses)
