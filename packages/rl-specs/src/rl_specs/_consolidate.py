"""Helpers for lazy stacks of specs: exclusive keys, laziness checks and consolidation."""

from __future__ import annotations

import torch

from ._base import TensorSpec
from ._composite import Composite
from ._stacked import Stacked, StackedComposite


def _empty_like(spec: TensorSpec, batch: torch.Size) -> TensorSpec:
    """``spec`` with every dim after ``batch`` (except event dims) sliced down to size 0."""
    if isinstance(spec, Composite):
        return Composite(
            {k: _empty_like(v, batch) for k, v in spec.items() if v is not None},
            shape=spec.shape,
            device=spec.device,
        )
    inner = spec.ndim - spec._event_ndim - len(batch)
    return spec[(slice(None),) * len(batch) + (slice(0, 0),) * max(inner, 0)]


def consolidate_spec(
    spec: Composite,
    recurse_through_entries: bool = True,
    recurse_through_stack: bool = True,
) -> Composite:
    """Given a TensorSpec, removes exclusive keys by adding 0 shapes.

    Every member of a :class:`StackedComposite` gets the keys that only some members
    have, as an empty spec (size-0 trailing dims) of the same class. Once stacked, the
    sizes that differ read ``-1``, so the stack has no exclusive key left.

    Args:
        spec (Composite): the spec to consolidate (other specs are returned cloned).
        recurse_through_entries (bool, optional): consolidate nested composites too.
            Defaults to ``True``.
        recurse_through_stack (bool, optional): consolidate the members of a lazy stack
            too. Defaults to ``True``.

    Examples:
        >>> import torch
        >>> from rl_specs import Composite, Unbounded
        >>> a = Composite(obs=Unbounded(shape=(3,)), extra=Unbounded(shape=(2,)))
        >>> b = Composite(obs=Unbounded(shape=(3,)))
        >>> stacked = torch.stack([a, b])
        >>> check_no_exclusive_keys(stacked)
        False
        >>> fixed = consolidate_spec(stacked)
        >>> check_no_exclusive_keys(fixed), fixed["extra"].shape
        (True, torch.Size([2, -1]))
    """
    spec = spec.clone()
    if isinstance(spec, StackedComposite):
        members = list(spec._specs)
        every: dict[str, TensorSpec | None] = {}
        for member in members:
            for key in member.keys():
                every.setdefault(key, member[key])
        for member in members:
            for key, example in every.items():
                if key not in member:
                    member[key] = None if example is None else _empty_like(example, member.shape)
        if recurse_through_stack:
            members = [
                consolidate_spec(m, recurse_through_entries, recurse_through_stack) for m in members
            ]
        return StackedComposite(*members, dim=spec.dim)
    if isinstance(spec, Composite) and recurse_through_entries:
        for key, value in list(spec.items()):
            if isinstance(value, Composite):
                spec[key] = consolidate_spec(value, recurse_through_entries, recurse_through_stack)
    return spec


def check_no_exclusive_keys(spec: TensorSpec, recurse: bool = True) -> bool:
    """Whether no lazy stack in ``spec`` has exclusive keys (keys only some members have).

    Args:
        spec (TensorSpec): the spec to inspect.
        recurse (bool, optional): look into nested composites and stack members too.
            Defaults to ``True``.

    Examples:
        >>> import torch
        >>> from rl_specs import Composite, Unbounded
        >>> same = torch.stack([Composite(a=Unbounded()), Composite(a=Unbounded((2,)))])
        >>> check_no_exclusive_keys(same)
        True
    """
    if isinstance(spec, StackedComposite):
        if spec.exclusive_keys():
            return False
        return not recurse or all(check_no_exclusive_keys(m, recurse) for m in spec._specs)
    if isinstance(spec, Composite) and recurse:
        return all(check_no_exclusive_keys(v, recurse) for v in spec.values() if v is not None)
    return True


def contains_lazy_spec(spec: TensorSpec) -> bool:
    """Whether ``spec`` is, or holds at any depth, a lazy stack (``Stacked``/``StackedComposite``).

    Examples:
        >>> import torch
        >>> from rl_specs import Bounded, Composite
        >>> lazy = torch.stack([Bounded(0, 1, shape=(2,)), Bounded(0, 2, shape=(2,))])
        >>> contains_lazy_spec(Composite(action=lazy, shape=(2,))), contains_lazy_spec(lazy[0])
        (True, False)
    """
    if isinstance(spec, (Stacked, StackedComposite)):
        return True
    if isinstance(spec, Composite):
        return any(contains_lazy_spec(v) for v in spec.values() if v is not None)
    return False
