"""The transform protocol of replay buffers and the internal ordered list of transforms.

A transform is any callable on the sampled data.  If it also has an ``inv``
method, ``inv`` is applied to the data on its way *into* the buffer (in reverse
order).  A transform that keeps write state every writer must see sets
``requires_shared_write_state = True`` and offers ``share()``, which a buffer built
with ``shared=True`` calls when the transform is added (and refuses one without it).  rl-transforms' ``Transform`` objects follow this protocol; rl-replay
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


def _share(transform: Any) -> None:
    """Make a transform usable by a buffer shared between processes, or refuse it.

    A transform whose ``requires_shared_write_state`` is true keeps state that every
    writer must see; it is shared through its ``share()`` method, and refused when it
    has none (each process would silently keep its own copy).

    Raises:
        RuntimeError: if the transform needs shared write state and cannot share it.
    """
    if not getattr(transform, "requires_shared_write_state", False):
        return
    share = getattr(transform, "share", None)
    if not callable(share):
        raise RuntimeError(
            f"{type(transform).__name__} keeps write state that every process writing to a "
            "shared buffer must see (requires_shared_write_state=True), but it has no share() "
            "method to put that write state in shared memory. Give it a share() method, or "
            "use it with a buffer built with shared=False."
        )
    share()


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

    def append(self, transform: Any, invert: bool = False, *, shared: bool = False) -> None:
        self.insert(len(self._items), transform, invert, shared=shared)

    def insert(
        self, index: int, transform: Any, invert: bool = False, *, shared: bool = False
    ) -> None:
        self._check(transform)
        if shared:
            _share(transform)
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
