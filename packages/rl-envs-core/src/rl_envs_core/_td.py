"""Reads and writes of plain ``TensorDict`` entries without the generic key machinery.

The per-step loop of an env touches a handful of top-level entries of tensordicts
it built itself. ``TensorDict.get``/``set`` parse nested keys and re-validate every
value; for a plain ``TensorDict`` and a ``str`` key the same result is one dict
access. Every helper here falls back to the public method for any other type or
key, so callers stay correct for lazy stacks, tensorclasses and nested keys.

Sibling distributions (transforms, batched envs, adapters), whose per-step code
has the same needs, reach these through :mod:`rl_envs_core.extension`.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from tensordict import NestedKey, TensorDict, TensorDictBase


def entries(td: TensorDictBase) -> Mapping[str, object]:
    """The top-level ``{name: value}`` mapping of ``td``, not copied for a ``TensorDict``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> sorted(entries(TensorDict({"a": torch.zeros(1)}, [])))
        ['a']
    """
    if type(td) is TensorDict:  # its leaf dict is exactly what items() yields
        return td._tensordict
    return dict(td.items())


def get_entry(td: TensorDictBase, key: NestedKey) -> object | None:
    """``td.get(key, None)``, one dict read for a plain ``TensorDict`` and a ``str`` key.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": {"b": torch.ones(1)}}, [])
        >>> get_entry(td, ("a", "b")), get_entry(td, "c")
        (tensor([1.]), None)
    """
    if type(key) is str and type(td) is TensorDict:
        return td._tensordict.get(key)
    return td.get(key, None)


def set_entry(td: TensorDictBase, key: NestedKey, value: torch.Tensor) -> None:
    """``td.set(key, value)``, straight to the validating ``str`` setter when it is one.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({}, [2])
        >>> set_entry(td, "a", torch.zeros(2, 1))
        >>> set_entry(td, ("b", "c"), torch.ones(2))
        >>> sorted(td.keys(True, True), key=str)
        [('b', 'c'), 'a']
    """
    if type(key) is str and type(td) is TensorDict:
        td._set_str(key, value, inplace=False, validated=False)
    else:
        td.set(key, value)


def set_child(parent: TensorDictBase, key: str, child: TensorDictBase) -> None:
    """``parent.set(key, child)``, skipping the validation when it can change nothing.

    The generic ``set`` checks the child's batch size, device and dim names against
    the parent's; when both are plain ``TensorDict`` s with the same batch size, no
    dim names and a compatible device, that check would accept the child as is.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> root = TensorDict({"a": torch.zeros(2, 1)}, [2])
        >>> set_child(root, "next", TensorDict({"a": torch.ones(2, 1)}, [2]))
        >>> root["next", "a"].sum().item()
        2.0
    """
    if (
        type(parent) is TensorDict
        and type(child) is TensorDict
        and parent._td_dim_names is None
        and child._td_dim_names is None
        and child._batch_size == parent._batch_size
        and (parent._device is None or child._device == parent._device)
    ):
        parent._set_str(key, child, inplace=False, validated=True)
    else:
        parent.set(key, child)


def any_true(value: torch.Tensor) -> bool:
    """``bool(value.any())``; a one-element tensor is read directly (no reduction kernel).

    Examples:
        >>> import torch
        >>> any_true(torch.tensor([False])), any_true(torch.tensor([[False], [True]]))
        (False, True)
    """
    return bool(value) if value.numel() == 1 else bool(value.any())
