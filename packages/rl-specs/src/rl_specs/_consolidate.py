"""Helpers for lazy stacks of specs: exclusive keys, laziness checks and consolidation."""

from __future__ import annotations

import torch

from ._base import TensorSpec
from ._composite import Composite
from ._stacked import Stacked, StackedComposite


def _placeholder(found: list[TensorSpec | None], batch: torch.Size) -> TensorSpec | None:
    """An empty stand-in, for a member of batch shape ``batch``, of an exclusive key.

    ``found`` holds the key's specs in the members that have it. A composite gets an
    empty composite, a lazy stack a stack of placeholders. A leaf keeps the batch dims
    and, where the members agree, the other dims; dims where they differ get size 0
    (all the non-batch dims when they all agree), so that stacking adds no new ``-1``
    where the members agree.

    Raises:
        ValueError: if the members hold specs of different classes at that key.
    """
    first = found[0]
    if first is None:
        return None
    classes = sorted({type(spec).__name__ for spec in found})
    if len(classes) > 1:
        raise ValueError(
            f"consolidate_spec found one key holding specs of the classes {classes} in "
            "different members of a lazy stack. Give the key one spec class in every member."
        )
    if isinstance(first, Composite):
        return first.empty()
    if isinstance(first, Stacked):
        inner = batch[: first.dim] + batch[first.dim + 1 :]
        return Stacked(*[_placeholder(first._specs, inner) for _ in first._specs], dim=first.dim)
    lead, end = len(batch), first.ndim - first._event_ndim
    same_rank = all(spec.ndim == first.ndim for spec in found)
    differ = [
        i for i in range(lead, end) if same_rank and len({s.shape[i] for s in found}) > 1
    ] or range(lead, end)
    index = tuple(
        slice(0, 0) if i in differ and first.shape[i] != -1 else slice(None) for i in range(end)
    )
    return first[index]


def consolidate_spec(
    spec: Composite,
    recurse_through_entries: bool = True,
    recurse_through_stack: bool = True,
) -> Composite:
    """Given a TensorSpec, removes exclusive keys by adding 0 shapes.

    Every member of a :class:`StackedComposite` gets the keys that only some members
    have, as an empty spec of the same class: it keeps the member's batch dims (and the
    sizes all the members agree on) and has size 0 elsewhere. Once stacked, the sizes
    that differ read ``-1``, so the stack has no exclusive key left.

    Args:
        spec (Composite): the spec to consolidate (other specs are returned cloned).
        recurse_through_entries (bool, optional): consolidate nested composites too.
            Defaults to ``True``.
        recurse_through_stack (bool, optional): consolidate the members of a lazy stack
            too. Defaults to ``True``.

    Raises:
        ValueError: if the members of a lazy stack hold specs of different classes at a key.

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
        if recurse_through_stack:
            members = [
                consolidate_spec(m, recurse_through_entries, recurse_through_stack) for m in members
            ]
        found: dict[str, list[TensorSpec | None]] = {}
        for member in members:
            for key in member.keys():
                found.setdefault(key, []).append(member[key])
        for member in members:
            for key, specs in found.items():
                if key not in member:
                    member[key] = _placeholder(specs, member.shape)
        spec = StackedComposite(*members, dim=spec.dim)
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
