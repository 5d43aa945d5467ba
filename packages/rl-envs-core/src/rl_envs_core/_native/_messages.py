"""Formatting helpers shared by the error messages of the native environments."""

from __future__ import annotations

from tensordict import TensorDictBase, is_leaf_nontensor

__all__ = ["entry_names"]


def entry_names(tensordict: TensorDictBase | None) -> str:
    """The entries of ``tensordict`` as ``[a, b, params.g]`` (nested keys dotted).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> entry_names(TensorDict({"b": torch.zeros(()), ("a", "x"): torch.zeros(()), "s": "text"}))
        '[a.x, b, s]'
        >>> entry_names(None)
        'no tensordict'
    """
    if tensordict is None:
        return "no tensordict"
    names = (
        key if isinstance(key, str) else ".".join(key)
        for key in tensordict.keys(include_nested=True, leaves_only=True, is_leaf=is_leaf_nontensor)
    )
    return "[" + ", ".join(sorted(names)) + "]"
