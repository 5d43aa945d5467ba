"""Moving a TED tensordict one step forward in time, and reading done signals.

Holds :func:`step_mdp` (``"next"`` content brought to the root) and
:func:`terminated_or_truncated` (done-like signals aggregated per nesting level).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
from tensordict import NestedKey, TensorDictBase, is_tensor_collection
from tensordict.utils import is_non_tensor

DONE_NAMES = ("done", "terminated", "truncated")


def as_tuple(key: NestedKey) -> tuple[str, ...]:
    """``"a"`` -> ``("a",)``; nested keys are flattened to one tuple."""
    if isinstance(key, str):
        return (key,)
    out: list[str] = []
    for part in key:
        out.extend(as_tuple(part))
    return tuple(out)


def as_key_list(keys: NestedKey | Sequence[NestedKey] | None) -> list[NestedKey]:
    """Accept one key or a list of keys; always return a list."""
    if keys is None:
        return []
    if isinstance(keys, str) or (isinstance(keys, tuple) and all(isinstance(k, str) for k in keys)):
        return [keys]
    return list(keys)


def carry_missing(
    dst: TensorDictBase,
    src: TensorDictBase,
    excluded: frozenset[tuple[str, ...]],
    prefix: tuple[str, ...] = (),
) -> None:
    """Copy (by reference) every entry of ``src`` absent from ``dst``, except ``excluded``.

    Nested tensordicts of ``dst`` are edited in place; nested tensordicts of
    ``src`` are never modified.
    """
    dst_keys = dst.keys()
    for key, value in src.items():
        full = (*prefix, key)
        if full in excluded:
            continue
        if is_tensor_collection(value) and not is_non_tensor(value):
            sub = dst.get(key, None) if key in dst_keys else None
            if sub is None:
                sub = value.empty()
                carry_missing(sub, value, excluded, full)
                dst.set(key, sub)
            else:
                carry_missing(sub, value, excluded, full)
        elif key not in dst_keys:
            dst.set(key, value)


def drop_keys(td: TensorDictBase, keys: Iterable[NestedKey]) -> None:
    """Delete ``keys`` from ``td`` in place when present."""
    for key in keys:
        if td.get(key, None) is not None:
            td.del_(key)


def advance(
    tensordict: TensorDictBase,
    *,
    root_excluded: frozenset[tuple[str, ...]],
    next_excluded: Sequence[NestedKey],
    keep_other: bool = True,
) -> TensorDictBase:
    """The root of the next time step: ``"next"`` content, then the root's other entries."""
    out = tensordict.get("next").copy()
    drop_keys(out, next_excluded)
    if keep_other:
        carry_missing(out, tensordict, root_excluded)
    return out


def step_mdp(
    tensordict: TensorDictBase,
    next_tensordict: TensorDictBase | None = None,
    keep_other: bool = True,
    exclude_reward: bool = True,
    exclude_done: bool = False,
    exclude_action: bool = True,
    reward_keys: NestedKey | Sequence[NestedKey] = "reward",
    done_keys: NestedKey | Sequence[NestedKey] = "done",
    action_keys: NestedKey | Sequence[NestedKey] = "action",
) -> TensorDictBase:
    """Create a new tensordict that reflects a step in time of the input tensordict.

    The content of ``tensordict["next"]`` becomes the root of the result; the root
    entries of ``tensordict`` that ``"next"`` does not overwrite are kept when
    ``keep_other`` is ``True``. The input is not modified.

    Args:
        tensordict (TensorDictBase): a TED tensordict with a ``"next"`` entry.
        next_tensordict (TensorDictBase, optional): destination, updated in place and
            returned. Defaults to ``None`` (a new tensordict).
        keep_other (bool, optional): keep the root entries that are not in ``"next"``.
            Defaults to ``True``.
        exclude_reward (bool, optional): drop the reward keys. Defaults to ``True``.
        exclude_done (bool, optional): drop the done keys. Defaults to ``False``.
        exclude_action (bool, optional): drop the action keys. Defaults to ``True``.
        reward_keys (NestedKey or list of NestedKey, optional): the reward entries.
            Defaults to ``"reward"``.
        done_keys (NestedKey or list of NestedKey, optional): the done entries.
            Defaults to ``"done"``.
        action_keys (NestedKey or list of NestedKey, optional): the action entries.
            Defaults to ``"action"``.

    Raises:
        KeyError: if ``tensordict`` has no ``"next"`` entry.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> data = TensorDict({
        ...     "obs": torch.zeros(2), "action": torch.ones(2), "hidden": torch.ones(2),
        ...     "next": {"obs": torch.ones(2), "reward": torch.ones(2), "done": torch.zeros(2, dtype=torch.bool)},
        ... }, [2])
        >>> out = step_mdp(data)
        >>> sorted(out.keys())
        ['done', 'hidden', 'obs']
        >>> out["obs"]
        tensor([1., 1.])
    """
    if "next" not in tensordict.keys():
        raise KeyError(
            f"step_mdp expected a 'next' entry in the tensordict, got keys "
            f"{sorted(map(str, tensordict.keys()))}. Pass the output of env.step()."
        )
    dropped: list[NestedKey] = []
    if exclude_reward:
        dropped += as_key_list(reward_keys)
    if exclude_done:
        dropped += as_key_list(done_keys)
    root_dropped = {("next",), *map(as_tuple, dropped)}
    if exclude_action:
        root_dropped.update(map(as_tuple, as_key_list(action_keys)))
    out = advance(
        tensordict,
        root_excluded=frozenset(root_dropped),
        next_excluded=dropped,
        keep_other=keep_other,
    )
    if not keep_other and not exclude_action:
        for key in as_key_list(action_keys):
            value = tensordict.get(key, None)
            if value is not None:
                out.set(key, value)
    if next_tensordict is not None:
        return next_tensordict.update(out)
    return out


def done_levels_of(data: TensorDictBase) -> dict[tuple[str, ...], list[NestedKey]]:
    """Done-like leaves of ``data`` grouped by nesting level."""
    levels: dict[tuple[str, ...], list[NestedKey]] = {}
    for key in data.keys(True, True):
        tup = as_tuple(key)
        if tup[-1] in DONE_NAMES:
            levels.setdefault(tup[:-1], []).append(key)
    return levels


def aggregate_done(
    data: TensorDictBase,
    levels: dict[tuple[str, ...], list[NestedKey]],
    key: str | None,
    write_full_false: bool,
) -> bool:
    """OR the done-like leaves of each level; optionally write the result at ``key``."""
    any_done = False
    for level, keys in levels.items():
        aggregated = None
        for done_key in keys:
            value = data.get(done_key, None)
            if value is None:
                continue
            aggregated = value if aggregated is None else aggregated | value
        if aggregated is None:
            continue
        level_done = bool(aggregated.any())
        any_done = any_done or level_done
        if key is not None and (level_done or write_full_false):
            data.set((*level, key) if level else key, aggregated.clone())
    return any_done


def terminated_or_truncated(
    data: TensorDictBase,
    full_done_spec: object | None = None,
    key: str | None = "_reset",
    write_full_false: bool = False,
) -> bool:
    """Read the done / terminated / truncated keys and aggregate them per nesting level.

    At every level holding done-like entries, their logical OR is written in place at
    ``key`` (``"_reset"`` by default), so the result can drive a partial reset.

    Args:
        data (TensorDictBase): the tensordict to read (and write into).
        full_done_spec (Composite, optional): the done spec whose leaves are read.
            Defaults to ``None``: every leaf named ``"done"``, ``"terminated"`` or
            ``"truncated"`` is read.
        key (str, optional): where to write the aggregate at each level; ``None``
            writes nothing. Defaults to ``"_reset"``.
        write_full_false (bool, optional): also write levels where nothing is done.
            Defaults to ``False``.

    Returns:
        ``True`` if any done-like entry is ``True``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> data = TensorDict({
        ...     "done": torch.tensor([[False], [False]]),
        ...     "agents": {"terminated": torch.tensor([[True], [False]])},
        ... }, [2])
        >>> terminated_or_truncated(data)
        True
        >>> data["agents", "_reset"].squeeze(-1)
        tensor([ True, False])
        >>> "_reset" in data.keys()
        False
    """
    if full_done_spec is not None:
        levels: dict[tuple[str, ...], list[NestedKey]] = {}
        for done_key in full_done_spec.keys(True, True):
            tup = as_tuple(done_key)
            levels.setdefault(tup[:-1], []).append(done_key)
    else:
        levels = done_levels_of(data)
    return aggregate_done(data, levels, key, write_full_false)


def zeros_like_entry(shape: torch.Size, like: torch.Tensor) -> torch.Tensor:
    """Zeros of ``shape`` with ``like``'s dtype and device."""
    return torch.zeros(shape, dtype=like.dtype, device=like.device)
