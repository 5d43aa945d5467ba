"""tensordict's and torch's private API, all of it, for rl-replay.

The one module of rl-replay that touches private names; each says why the public
API does not serve. CI runs the unit tests on the oldest and the newest tensordict
the pyprojects allow.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict

# private: torch has no public pytree module; buffers and storages accept any pytree
# of tensors (as TorchRL's do), and these are the functions that walk them
from torch.utils._pytree import (  # noqa: F401 - re-exported for rl-replay's modules
    tree_flatten,
    tree_leaves,
    tree_map,
    tree_unflatten,
    treespec_dumps,
    treespec_loads,
)

#: TensorDict's constructor without per-entry checks (the public one where a
#: tensordict release lacks it)
_new_unchecked = getattr(TensorDict, "_new_unsafe", None)


def new_unchecked(source: dict, batch_size: torch.Size) -> TensorDict:
    """``TensorDict(source, batch_size)`` without re-checking each entry.

    For sources gathered from validated storage tensors (or allocated for a spec):
    the public constructor checks every entry again, at every sample.

    Examples:
        >>> new_unchecked({"a": torch.zeros(3, 1)}, torch.Size([3])).batch_size
        torch.Size([3])
    """
    if _new_unchecked is None:  # public fallback
        return TensorDict(source, batch_size=batch_size)
    # private: _new_unsafe is the constructor without per-entry validation
    return _new_unchecked(source, batch_size=batch_size)


def tensorclass_data(obj: object) -> TensorDict:
    """The tensordict that holds a tensorclass instance's fields (shared, not copied).

    Examples:
        >>> from tensordict import tensorclass
        >>> @tensorclass
        ... class Point:
        ...     x: torch.Tensor
        >>> p = Point(x=torch.zeros(2), batch_size=[2])
        >>> tensorclass_data(p)["x"] is p.x
        True
    """
    # private: ``_tensordict`` is the backing store; ``to_tensordict()`` would copy it,
    # and the trees need the very object (weak references to parents, lazy stacks)
    return obj._tensordict
