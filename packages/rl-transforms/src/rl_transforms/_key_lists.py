"""Key and spec helpers shared by every transform: key lists, spec look-ups, errors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from tensordict import NestedKey, TensorDictBase, unravel_key

from rl_specs import Composite

if TYPE_CHECKING:
    from rl_specs import TensorSpec

KeyArg = NestedKey | Sequence[NestedKey] | None


def as_tuple(key: NestedKey) -> tuple[str, ...]:
    """``key`` as a tuple of strings (an unravelled nested key, or a 1-tuple)."""
    return key if isinstance(key, tuple) else (key,)


def key_list(keys: KeyArg, *, owner: str, name: str) -> list[NestedKey]:
    """Normalise ``keys`` (one key, a sequence of keys or ``None``) into a list of unravelled keys.

    Raises:
        TypeError: if an element is not a string or a tuple of strings.
    """
    if keys is None:
        return []
    if isinstance(keys, str) or (isinstance(keys, tuple) and all(isinstance(k, str) for k in keys)):
        keys = [keys]
    out = []
    for key in keys:
        try:
            out.append(unravel_key(key))
        except Exception as err:
            raise TypeError(
                f"{owner} expected {name} to hold string or tuple-of-string keys, got "
                f"{key!r} of type {type(key).__name__}. Pass e.g. {name}=['observation']."
            ) from err
    return out


def check_same_length(
    owner: str, in_keys: list[NestedKey], out_keys: list[NestedKey], names: tuple[str, str]
) -> None:
    """Raise when two paired key lists differ in length.

    Raises:
        ValueError: if ``len(in_keys) != len(out_keys)``.
    """
    if len(in_keys) != len(out_keys):
        raise ValueError(
            f"{owner} expected {names[0]} and {names[1]} of the same length, got "
            f"{names[0]}={in_keys} ({len(in_keys)}) and {names[1]}={out_keys} "
            f"({len(out_keys)}). Give one {names[1][:-1]} per {names[0][:-1]}, or leave "
            f"{names[1]} unset to transform the entries in place."
        )


def missing_key_error(owner: str, key: NestedKey, td: TensorDictBase, role: str) -> KeyError:
    """The error raised when a transform does not find one of its keys."""
    available = sorted(str(k) for k in td.keys(True, True))
    return KeyError(
        f"{owner} expected the entry {key!r} (one of its {role}) in the tensordict, but it is "
        f"missing; available entries: {available}. Fix the transform's {role} to name an "
        f"entry the environment (or the previous transform) produces."
    )


def spec_get(spec: Composite, key: NestedKey) -> TensorSpec | None:
    """``spec[key]`` or ``None`` when the composite has no such entry."""
    try:
        return spec[key]
    except KeyError:
        return None


def spec_del(spec: Composite, key: NestedKey) -> None:
    """Delete ``key`` from ``spec`` when present."""
    if spec_get(spec, key) is not None:
        del spec[key]


def map_leaf_specs(
    spec: Composite,
    in_keys: Sequence[NestedKey],
    out_keys: Sequence[NestedKey],
    fn: Callable[[TensorSpec], TensorSpec],
    *,
    drop_in: bool = False,
) -> Composite:
    """For each ``(in, out)`` pair present in ``spec``, set ``spec[out] = fn(spec[in])``.

    With ``drop_in``, the ``in`` entry is removed when it differs from ``out`` (used
    for inverse keys: the policy writes ``out``, never ``in``).

    A single leaf spec (not a :class:`Composite`) is taken as the spec of the
    transform's entry and mapped directly.
    """
    if spec is None:  # an absent role (e.g. full_state_spec=None)
        return spec
    if not isinstance(spec, Composite):
        return fn(spec) if in_keys else spec
    for in_key, out_key in zip(in_keys, out_keys):
        leaf = spec_get(spec, in_key)
        if leaf is None:
            continue
        new = fn(leaf)
        if drop_in and in_key != out_key:
            del spec[in_key]
        spec[out_key] = new
    return spec


def set_unlocked(spec: Composite) -> Composite:
    """Unlock ``spec`` in place when it supports locking; return it."""
    unlock = getattr(spec, "unlock_", None)
    if unlock is not None:
        unlock()
    return spec


def writable(spec: Composite) -> Composite:
    """``spec`` itself, or an unlocked clone when it is locked (the caller's spec stays as is)."""
    if getattr(spec, "locked", False):
        return set_unlocked(spec.clone())
    return spec
