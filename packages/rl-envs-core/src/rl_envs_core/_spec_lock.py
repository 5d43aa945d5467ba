"""Specs lock when the outermost subclass constructor returns (not inside ``EnvBase.__init__``).

A subclass sets its specs after ``super().__init__()``; locking them there would
make those assignments fail, so every subclass ``__init__`` is wrapped (by
``EnvBase.__init_subclass__``) and the lock is taken when the outermost returns.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any


def lock_specs_after(init: Callable[..., None]) -> Callable[..., None]:
    """Wrap a subclass ``__init__`` so the specs lock when the outermost one returns."""

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:  # Any: the subclass's own
        state = self.__dict__
        depth = state.get("_init_depth", 0)
        state["_init_depth"] = depth + 1
        try:
            init(self, *args, **kwargs)
        finally:
            state["_init_depth"] = depth
        if depth == 0 and "_output_spec" in state:
            self.set_spec_lock_(state.get("_spec_lock_wanted", True))

    return __init__
