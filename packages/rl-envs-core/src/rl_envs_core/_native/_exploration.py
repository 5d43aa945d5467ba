"""Exploration helpers: the sampling mode that probabilistic policies follow.

TorchRL documents ``set_exploration_type`` as an alias of tensordict's
``set_interaction_type``; the three names here are therefore tensordict's own
objects, so a block opened with either name is seen by both libraries.

* :data:`ExplorationType` -- the enum (``RANDOM``, ``MODE``, ``MEAN``, ``MEDIAN``,
  ``DETERMINISTIC``).
* :func:`exploration_type` -- the current type, ``None`` outside any block.
* :class:`set_exploration_type` -- a context manager and a decorator. The type is
  process-wide by default; ``thread_local=True`` confines it to the calling thread.

Examples:
    >>> from rl_envs_core._native._exploration import (
    ...     ExplorationType, exploration_type, set_exploration_type)
    >>> print(exploration_type())
    None
    >>> with set_exploration_type(ExplorationType.RANDOM):
    ...     print(exploration_type() is ExplorationType.RANDOM)
    True
    >>> @set_exploration_type("mode")
    ... def current():
    ...     return exploration_type()
    >>> print(current() is ExplorationType.MODE, exploration_type())
    True None
"""

from __future__ import annotations

# tensordict.nn.probabilistic holds the three names in every tensordict release this
# package supports (0.14 does not re-export interaction_type from tensordict.nn)
from tensordict.nn.probabilistic import InteractionType as ExplorationType
from tensordict.nn.probabilistic import interaction_type as exploration_type
from tensordict.nn.probabilistic import set_interaction_type as set_exploration_type

__all__ = ["ExplorationType", "exploration_type", "set_exploration_type"]
