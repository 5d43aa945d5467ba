"""tensordict's private API, all of it, for rl-envs-core and the packages above it.

This is the one module of rl-envs-core that touches tensordict internals
(``_tensordict``, ``_set_str``, ``_new_unsafe``, ``_td_dim_names``, ``_batch_size``,
``_device``); each use says why the public API does not serve, and each has a
fallback or a guard so that a tensordict release without it only costs speed. CI
runs the unit tests on the oldest and the newest tensordict the pyprojects allow.

Reads and writes of plain ``TensorDict`` entries without the generic key machinery:

The per-step loop of an env touches a handful of top-level entries of tensordicts
it built itself. ``TensorDict.get``/``set`` parse nested keys and re-validate every
value; for a plain ``TensorDict`` and a ``str`` key the same result is one dict
access. Every helper here falls back to the public method for any other type or
key, so callers stay correct for lazy stacks, tensorclasses and nested keys.

Sibling distributions (transforms, batched envs, adapters), whose per-step code
has the same needs, reach these through :mod:`rl_envs_core.extension`.
"""

from __future__ import annotations

import functools
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
    if type(td) is TensorDict:
        # private: items() builds an iterator and re-wraps nothing, but copying it into
        # a dict costs a microsecond per call on the per-step path; the leaf dict is
        # exactly what items() yields
        return td._tensordict
    return dict(td.items())


def entries_of(tds: list[TensorDictBase]) -> list[Mapping[str, object]]:
    """:func:`entries` of each of ``tds``, in one call (a stack reads one per step).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> [sorted(e) for e in entries_of([TensorDict({"a": torch.zeros(1)}, [])] * 2)]
        [['a'], ['a']]
    """
    # private: as in entries(), one list instead of a call per tensordict
    return [td._tensordict if type(td) is TensorDict else dict(td.items()) for td in tds]


def has_entries(td: TensorDictBase, names: frozenset[str]) -> bool:
    """Whether ``td`` is a plain ``TensorDict`` holding every top-level entry in ``names``.

    ``False`` says nothing (any other type, or a name missing): callers then take their
    general path.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"done": torch.zeros(1), "terminated": torch.zeros(1)}, [])
        >>> has_entries(td, frozenset({"done", "terminated"})), has_entries(td, frozenset({"x"}))
        (True, False)
    """
    # private: one set comparison against the leaf dict, where a loop of public
    # membership tests costs a microsecond per step
    return type(td) is TensorDict and td._tensordict.keys() >= names


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
        # private: the public get() parses the key and checks the default each call
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
        # private: set() parses the key and walks the nested-key machinery first
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
        # private (dim names, batch size, device, validated set): the public set()
        # re-checks what the guard above already established
        parent._set_str(key, child, inplace=False, validated=True)
    else:
        parent.set(key, child)


def set_validated(td: TensorDict, key: str, value: torch.Tensor) -> None:
    """Replace the entry ``key`` of a plain ``TensorDict`` by a value known to fit.

    For values with the shape, dtype and device of the entry they replace (masked
    merges): the public ``set`` would validate each one again.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2)}, [2])
        >>> set_validated(td, "a", torch.ones(2))
        >>> td["a"]
        tensor([1., 1.])
    """
    # private: set(..., validated) is not public; the caller guarantees the checks pass
    td._set_str(key, value, inplace=False, validated=True)


#: TensorDict's constructor without per-entry checks (``None`` where a tensordict
#: release lacks it): for sources built from validated entries
_new_unchecked = getattr(TensorDict, "_new_unsafe", None)


def new_unchecked(
    source: dict,
    batch_size: torch.Size,
    device: torch.device | None = None,
    *,
    nested: bool = True,
) -> TensorDict:
    """``TensorDict(source, batch_size, device)`` without re-checking each entry.

    For sources whose tensors already have the batch size as leading dims and live
    on ``device`` (entries of validated tensordicts, values built for the specs):
    the public constructor checks every entry again, which costs as much as a cheap
    env's dynamics. ``nested=False``: ``source`` holds no plain dicts to convert.

    Examples:
        >>> import torch
        >>> new_unchecked({"a": torch.zeros(3, 1)}, torch.Size([3])).batch_size
        torch.Size([3])
    """
    # the public fallback (where tensordict has no unchecked constructor): below, the
    # name is rebound to the unchecked constructor itself wherever it exists
    return TensorDict(source, batch_size=batch_size, device=device)


if _new_unchecked is not None:
    # private: _new_unsafe is the constructor without per-entry validation; it takes
    # the same (source, batch_size, device, *, nested) arguments. Bound through a
    # partial (a C callable, no Python frame: several calls per env step), with the
    # documentation and signature of the function above (its __wrapped__).
    new_unchecked = functools.wraps(new_unchecked)(functools.partial(_new_unchecked))


def to_device(td: TensorDictBase, device: torch.device) -> TensorDictBase:
    """``td.to(device)``, without the generic cast when nothing has to move.

    An env's step output is often built without a device, its tensors already on the
    env's: for a plain one-level ``TensorDict`` whose tensors all live on ``device``,
    the result holds the same tensors, labelled with the device (what ``to`` returns
    then too), for a fraction of the generic cast's cost.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2)}, [2])
        >>> out = to_device(td, torch.device("cpu"))
        >>> out.device, out["a"] is td["a"]
        (device(type='cpu'), True)
    """
    if type(td) is TensorDict and td._td_dim_names is None and _new_unchecked is not None:
        # private (leaf dict, dim names, batch size): reading them is how the guard
        # knows that the cast would move nothing and rename nothing
        leaves = td._tensordict
        for value in leaves.values():
            if type(value) is not torch.Tensor or value.device != device:
                return td.to(device)
        return _new_unchecked(leaves, td._batch_size, device, nested=False)
    return td.to(device)


def any_true(value: torch.Tensor) -> bool:
    """``bool(value.any())``; a one-element tensor is read directly (no reduction kernel).

    Examples:
        >>> import torch
        >>> any_true(torch.tensor([False])), any_true(torch.tensor([[False], [True]]))
        (False, True)
    """
    return bool(value) if value.numel() == 1 else bool(value.any())
