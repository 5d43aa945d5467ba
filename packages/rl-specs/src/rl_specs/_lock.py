"""Locking of composite specs: ``lock_`` / ``unlock_`` and the graph of locked parents.

A composite locked with ``recurse=True`` locks its nested composites and records itself
(and its own locking ancestors) in each of them. A nested composite cannot be unlocked
while one of the composites that locked it is still locked: unlock the root instead.
A composite shared by two locked trees stays locked until both roots are unlocked.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import Any


class _LockableMixin:
    """The lock state of a composite and of the graph of composites that locked it.

    Subclasses list the composites a lock reaches with :meth:`_lock_children`.
    """

    _locked: bool
    _lock_parents: list[weakref.ref]

    def _lock_children(self, recurse: bool) -> Iterable[_LockableMixin]:
        raise NotImplementedError  # abstract: Composite and StackedComposite say what they hold

    @property
    def is_locked(self) -> bool:
        """Whether the composite refuses modifications (see :meth:`lock_`)."""
        return self._locked

    @is_locked.setter
    def is_locked(self, value: bool) -> None:
        if value:
            self.lock_()
        else:
            self.unlock_()

    @property
    def locked(self) -> bool:
        """Same as :attr:`is_locked`."""
        return self._locked

    def lock_(self, recurse: bool | None = None) -> Any:  # Any: self, of the subclass's type
        """Lock the composite (and, by default, its nested composites) against changes.

        Args:
            recurse (bool, optional): lock the nested composites too; they then cannot be
                unlocked on their own while this composite stays locked. Defaults to ``True``.

        Returns:
            the composite itself.
        """
        if not self._locked:
            self._spread_lock(recurse is None or recurse, ())
        return self

    def _spread_lock(self, recurse: bool, parents: tuple[weakref.ref, ...]) -> None:
        self._locked = True
        known = self._lock_parents
        known.extend(ref for ref in parents if not any(ref is old for old in known))
        chain = (*parents, weakref.ref(self))
        for child in self._lock_children(recurse):
            child._spread_lock(True, chain)

    def unlock_(self, recurse: bool | None = None) -> Any:  # Any: self, of the subclass's type
        """Unlock the composite (and, by default, its nested composites).

        Args:
            recurse (bool, optional): unlock the nested composites too. Defaults to ``True``.

        Returns:
            the composite itself.

        Raises:
            RuntimeError: if the composite, or a nested one when ``recurse``, was locked by
                a composite that is still locked. Nothing is unlocked then.
        """
        recurse = recurse is None or recurse
        reached = [self]
        self._spread_unlock(recurse, reached)
        for spec in reached:
            holder = spec._locked_holder()
            if holder is not None:
                self.lock_(recurse)  # put every reached spec back as it was
                raise RuntimeError(
                    "Cannot unlock a Composite that is part of a locked graph: it was locked "
                    f"through a parent that is still locked (a {type(holder).__name__} with "
                    f"keys {sorted(map(str, holder.keys()))}). Unlock that root composite "
                    "first, or work on spec.clone()."
                )
        for spec in reached:
            spec._lock_parents.clear()
        return self

    def _spread_unlock(self, recurse: bool, reached: list[_LockableMixin]) -> None:
        self._locked = False
        for child in self._lock_children(recurse):
            reached.append(child)
            child._spread_unlock(True, reached)

    def _locked_holder(self) -> _LockableMixin | None:
        """A still-locked composite that locked this one, if any."""
        for ref in self._lock_parents:
            parent = ref()
            if parent is not None and parent._locked:
                return parent
        return None

    def _check_unlocked(self, what: str) -> None:
        if self._locked:
            raise RuntimeError(
                f"Cannot set {what}: the Composite is locked. Call spec.unlock_() first "
                "(and spec.lock_() afterwards), or modify a spec.clone()."
            )

    # weak references do not pickle: a locked composite re-links its locked children
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_lock_parents"] = []
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self._locked:
            chain = (weakref.ref(self),)
            for child in self._lock_children(True):
                if child._locked:
                    child._relink(chain)

    def _relink(self, chain: tuple[weakref.ref, ...]) -> None:
        self._lock_parents.extend(chain)
        for child in self._lock_children(True):
            if child._locked:
                child._relink(chain)
