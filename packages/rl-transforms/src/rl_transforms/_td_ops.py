"""Per-step reads and writes of tensordict entries, without the generic key parsing.

Transforms read and write a few entries of every step's data. For a plain
``TensorDict`` and a ``str`` key, ``get(key, None)`` is one dict read and
``set(key, value)`` is ``_set_str`` (``set`` only unravels the key before calling
it). Any other container or key goes through the public methods, so lazy stacks,
tensorclasses and nested keys behave exactly as before.
"""

from __future__ import annotations

from typing import Any

from tensordict import NestedKey, TensorDict, TensorDictBase


def read(td: TensorDictBase, key: NestedKey) -> Any:  # Any: a tensor, a tensordict or None
    """``td.get(key, None)``.

    Examples:
        >>> import torch
        >>> td = TensorDict({"a": torch.zeros(1), "b": {"c": torch.ones(1)}}, [])
        >>> read(td, "a"), read(td, ("b", "c")), read(td, "missing")
        (tensor([0.]), tensor([1.]), None)
    """
    if type(key) is str and type(td) is TensorDict:
        # TensorDict.get(str, None) reads this dict and returns None when absent
        return td._tensordict.get(key)
    return td.get(key, None)


def write(td: TensorDictBase, key: NestedKey, value: Any) -> None:  # Any: what td.set accepts
    """``td.set(key, value)``; the value is validated (shape, device, lock) as ``set`` does.

    Examples:
        >>> import torch
        >>> td = TensorDict(batch_size=[2])
        >>> write(td, "a", torch.zeros(2, 3))
        >>> write(td, ("b", "c"), torch.ones(2))
        >>> td["b", "c"]
        tensor([1., 1.])
        >>> write(td, "a", torch.zeros(3))
        Traceback (most recent call last):
        ...
        RuntimeError: batch dimension mismatch, ...
    """
    if type(key) is str and type(td) is TensorDict:
        # what TensorDict.set does for a one-element key, minus the key unravelling
        td._set_str(key, value, inplace=False, validated=False)
    else:
        td.set(key, value)
