"""Moving a TED tensordict one step forward in time, and reading done signals.

Holds :func:`step_mdp` (``"next"`` content brought to the root) and
:func:`terminated_or_truncated` (done-like signals aggregated per nesting level).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch
from tensordict import LazyStackedTensorDict, NestedKey, TensorDict, TensorDictBase
from tensordict.utils import is_non_tensor
from torch import Tensor

from rl_envs_core._td import any_true, entries, get_entry, new_unchecked, set_entry

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


def _is_leaf_class(cls: type) -> bool:
    return not issubclass(cls, TensorDictBase) or bool(getattr(cls, "_is_non_tensor", False))


def leaf_keys(td: TensorDictBase) -> list[NestedKey]:
    """Every leaf key of ``td``, non-tensor entries (``NonTensorData``) included."""
    return list(td.keys(True, True, is_leaf=_is_leaf_class))


def _is_nested(value: object) -> bool:
    if type(value) is torch.Tensor:  # the common case, without the ABC instance check
        return False
    return isinstance(value, TensorDictBase) and not is_non_tensor(value)


@functools.lru_cache(maxsize=512)
def names_at(excluded: frozenset[tuple[str, ...]], prefix: tuple[str, ...]) -> frozenset[str]:
    """The last names of the ``excluded`` key tuples that sit directly under ``prefix``.

    Lets a merge compare plain ``str`` names per level instead of building a full
    key tuple for every entry; cached because the excluded sets come from the key
    cache and so repeat at every step.
    """
    depth = len(prefix)
    return frozenset(
        key[depth] for key in excluded if len(key) == depth + 1 and key[:depth] == prefix
    )


def merge_levels(
    nxt: TensorDictBase | None,
    root: TensorDictBase | None,
    next_excluded: frozenset[tuple[str, ...]],
    root_excluded: frozenset[tuple[str, ...]],
    prefix: tuple[str, ...] = (),
) -> TensorDictBase:
    """A new tensordict: ``nxt``'s entries, then ``root``'s entries ``nxt`` lacks.

    Leaves are shared by reference; every nested tensordict of the result is new,
    so neither input is ever modified. ``*_excluded`` hold full key tuples to skip.
    A nested level left without entries is dropped. Lazy stacks are merged member
    by member and stacked lazily again, so heterogeneous members keep their own
    shapes and keys.
    """
    if type(nxt) is LazyStackedTensorDict or type(root) is LazyStackedTensorDict:
        return _merge_lazy(nxt, root, next_excluded, root_excluded, prefix)
    items: dict[str, object] = {}
    root_skip = names_at(root_excluded, prefix)
    root_entries = entries(root) if root is not None else {}
    if nxt is not None:
        next_skip = names_at(next_excluded, prefix)
        for key, value in entries(nxt).items():
            if key in next_skip:
                continue
            if type(value) is not Tensor and _is_nested(value):
                sub_root = root_entries.get(key) if key not in root_skip else None
                sub_root = sub_root if _is_nested(sub_root) else None
                merged = merge_levels(value, sub_root, next_excluded, root_excluded, (*prefix, key))
                if merged.is_empty():
                    continue  # no entry left there (all excluded, or none to begin with)
                value = merged
            items[key] = value
    for key, value in root_entries.items():
        if key in items or key in root_skip:
            continue
        if type(value) is not Tensor and _is_nested(value):
            merged = merge_levels(None, value, next_excluded, root_excluded, (*prefix, key))
            if merged.is_empty():
                continue
            value = merged
        items[key] = value
    like = nxt if nxt is not None else root
    if (
        root is None
        or nxt is None
        or (root.batch_size == nxt.batch_size and root.device == nxt.device)
    ):
        # Every leaf comes from a validated tensordict with this batch size and device;
        # no value is a plain dict, so nested=False just copies the dict in.
        return new_unchecked(items, like.batch_size, like.device, nested=False)
    return TensorDict(items, batch_size=like.batch_size, device=like.device)


def _members(td: TensorDictBase | None, dim: int, count: int) -> list[TensorDictBase | None]:
    if td is None:
        return [None] * count
    if type(td) is LazyStackedTensorDict and td.stack_dim == dim:
        return list(td.tensordicts)
    return list(td.unbind(dim))


def _merge_lazy(
    nxt: TensorDictBase | None,
    root: TensorDictBase | None,
    next_excluded: frozenset[tuple[str, ...]],
    root_excluded: frozenset[tuple[str, ...]],
    prefix: tuple[str, ...],
) -> TensorDictBase:
    lazy = nxt if type(nxt) is LazyStackedTensorDict else root
    dim = lazy.stack_dim
    count = len(lazy.tensordicts)
    merged = [
        merge_levels(n, r, next_excluded, root_excluded, prefix)
        for n, r in zip(_members(nxt, dim, count), _members(root, dim, count))
    ]
    return LazyStackedTensorDict.lazy_stack(merged, dim)


def advance(
    tensordict: TensorDictBase,
    *,
    root_excluded: frozenset[tuple[str, ...]],
    next_excluded: frozenset[tuple[str, ...]],
    keep_other: bool = True,
) -> TensorDictBase:
    """The root of the next time step: ``"next"`` content, then the root's other entries."""
    nxt = get_entry(tensordict, "next")
    return merge_levels(
        nxt if nxt is not None else tensordict.get("next"),  # the generic get raises if missing
        tensordict if keep_other else None,
        next_excluded,
        root_excluded,
    )


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
    if type(tensordict) is LazyStackedTensorDict:
        # member by member, so heterogeneous members keep their own shapes and keys
        dim = tensordict.stack_dim
        dests = (
            [None] * len(tensordict.tensordicts)
            if next_tensordict is None
            else _members(next_tensordict, dim, len(tensordict.tensordicts))
        )
        out = LazyStackedTensorDict.lazy_stack(
            [
                step_mdp(
                    member,
                    dest,
                    keep_other=keep_other,
                    exclude_reward=exclude_reward,
                    exclude_done=exclude_done,
                    exclude_action=exclude_action,
                    reward_keys=reward_keys,
                    done_keys=done_keys,
                    action_keys=action_keys,
                )
                for member, dest in zip(tensordict.tensordicts, dests)
            ],
            dim,
        )
        return out if next_tensordict is None else next_tensordict.update(out)
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
        next_excluded=frozenset(map(as_tuple, dropped)),
        keep_other=keep_other,
    )
    if not keep_other and not exclude_action:
        for key in as_key_list(action_keys):
            _copy_entry(tensordict, out, as_tuple(key))
    if next_tensordict is not None:
        return next_tensordict.update(out)
    return out


def _copy_entry(source: TensorDictBase, dest: TensorDictBase, key: tuple[str, ...]) -> None:
    """Copy ``source[key]`` into ``dest``, creating missing levels with the source's batch size."""
    for name in key[:-1]:
        sub_source = source.get(name, None)
        if sub_source is None:
            return
        sub_dest = dest.get(name, None)
        if sub_dest is None:
            sub_dest = sub_source.empty()
            dest.set(name, sub_dest)
        source, dest = sub_source, sub_dest
    value = source.get(key[-1], None)
    if value is not None:
        dest.set(key[-1], value)


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
            value = get_entry(data, done_key)
            if value is None:
                continue
            aggregated = value if aggregated is None else aggregated | value
        if aggregated is None:
            continue
        level_done = any_true(aggregated)
        any_done = any_done or level_done
        if key is not None and (level_done or write_full_false):
            set_entry(data, (*level, key) if level else key, aggregated.clone())
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
