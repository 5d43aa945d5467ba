"""Spec accessors of ``EnvBase``: thin views over one ``Composite`` per role.

An environment stores two composites, ``output_spec`` (``full_observation_spec``,
``full_reward_spec``, ``full_done_spec``) and ``input_spec`` (``full_action_spec``,
``full_state_spec``). Every documented accessor (``action_spec``,
``full_action_spec``, ``action_spec_unbatched``, ...) is a :class:`SpecView`
descriptor built by :func:`spec_views`; assignment goes through one function,
:func:`assign_full_spec`, which validates the batch size, unlocks, edits, relocks
and clears the key caches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from tensordict import NestedKey

from rl_envs_core._step_mdp import as_tuple
from rl_specs import Composite, Stacked, TensorSpec

if TYPE_CHECKING:
    from rl_envs_core._env_base import EnvBase

#: role -> the parent composite holding ``full_<role>_spec``.
ROLE_PARENT = {
    "observation": "output_spec",
    "reward": "output_spec",
    "done": "output_spec",
    "action": "input_spec",
    "state": "input_spec",
}
#: roles whose short accessor returns the leaf when there is exactly one.
LEAF_ROLES = {"action": "action", "reward": "reward", "done": "done"}
# a leaf spec assigned to ``<role>_spec`` is stored under this key of the role's composite
WRAPPED_LEAF_ROLES = {**LEAF_ROLES, "observation": "observation"}
PARENT_ROLES = {
    "output_spec": ("observation", "reward", "done"),
    "input_spec": ("action", "state"),
}


def set_locked(spec: Composite, locked: bool) -> None:
    """Lock or unlock ``spec`` in place (a no-op for specs without a lock)."""
    method = getattr(spec, "lock_" if locked else "unlock_", None)
    if method is not None:
        method()


def unbatch(spec: TensorSpec, batch_size: torch.Size) -> TensorSpec:
    """Return ``spec`` without its leading ``batch_size`` dims."""
    if not batch_size:
        return spec
    return spec[(0,) * len(batch_size)]


def _check_batch(role: str, spec: TensorSpec, batch_size: torch.Size) -> None:
    shape = tuple(spec.shape)
    if shape[: len(batch_size)] != tuple(batch_size):
        raise ValueError(
            f"The {role} spec must have the env batch size {tuple(batch_size)} as leading "
            f"dims, got shape {shape}. Build it with shape=(*env.batch_size, ...) "
            f"(for a Composite: shape=env.batch_size), or assign to "
            f"'{role}_spec_unbatched' to have the batch dims added for you."
        )


#: a done flag -> its twin: each one alone also means the other
_DONE_TWINS = {"done": "terminated", "terminated": "done"}


def done_dual(key: NestedKey) -> NestedKey | None:
    """The twin of a ``done`` / ``terminated`` key at the same level (``None`` for others).

    An env that declares or returns only one of the two has it stand for both; done
    completion (of specs and of step outputs) copies it to the twin.

    Examples:
        >>> done_dual("done"), done_dual(("agents", "terminated")), done_dual("truncated")
        ('terminated', ('agents', 'done'), None)
    """
    tup = as_tuple(key)
    twin = _DONE_TWINS.get(tup[-1])
    if twin is None:
        return None
    return twin if len(tup) == 1 else (*tup[:-1], twin)


def flank_done(spec: Composite) -> Composite:
    """Make every ``done`` have a ``terminated`` twin and vice versa, at every level."""
    keys = {as_tuple(key) for key in spec.keys(True, True)}
    for key in sorted(keys):
        twin = done_dual(key)
        if twin is not None and as_tuple(twin) not in keys:
            spec[twin] = spec[key].clone()
    return spec


def assign_full_spec(env: EnvBase, role: str, value: Composite) -> None:
    """Validate ``value`` and store it as ``full_<role>_spec`` of ``env``."""
    if not isinstance(value, Composite):
        raise TypeError(
            f"full_{role}_spec must be a Composite, got {type(value).__name__}. "
            f"Assign a leaf spec to '{role}_spec' instead, or wrap it: "
            f"Composite({LEAF_ROLES.get(role, role)}=spec, shape=env.batch_size)."
        )
    _check_batch(f"full_{role}", value, env.batch_size)
    value = value.clone()
    if env.device is not None:
        value = value.to(env.device)
    if role == "done":
        set_locked(value, False)
        value = flank_done(value)
    parent = env.__dict__[f"_{ROLE_PARENT[role]}"]
    set_locked(parent, False)
    parent[f"full_{role}_spec"] = value
    if env.is_spec_locked:
        set_locked(parent, True)
    env._invalidate_cache()


def assign_parent_spec(env: EnvBase, parent_name: str, value: Composite) -> None:
    """Store a whole ``input_spec`` / ``output_spec``, one role at a time."""
    if not isinstance(value, Composite):
        raise TypeError(f"{parent_name} must be a Composite, got {type(value).__name__}.")
    expected = {f"full_{role}_spec" for role in PARENT_ROLES[parent_name]}
    unknown = set(value.keys()) - expected
    if unknown:
        raise KeyError(
            f"{parent_name} accepts only the keys {sorted(expected)}, got unexpected "
            f"{sorted(unknown)}. Put these specs under one of the accepted entries."
        )
    for role in PARENT_ROLES[parent_name]:
        key = f"full_{role}_spec"
        if key in value.keys():
            assign_full_spec(env, role, value[key])


def install_stacked_specs(env: EnvBase, specs: Composite, *, lazy: bool) -> None:
    """Give ``env`` the ``Composite(output_spec=..., input_spec=...)`` of its stacked sub-envs.

    Dense stacks go through the validating setters; lazy (heterogeneous) stacks are
    stored as they are, and the generic input/output check is marked done: each
    sub-env checks its own data, and that check cannot read heterogeneous stacks.
    """
    if not lazy:
        env.output_spec = specs["output_spec"]
        env.input_spec = specs["input_spec"]
        return
    state = env.__dict__
    state["_output_spec"] = specs["output_spec"].to(env.device)
    state["_input_spec"] = specs["input_spec"].to(env.device)
    env._invalidate_cache()
    state["_io_checked"] = True


def empty_composite(env: EnvBase) -> Composite:
    """An empty ``Composite`` with the env's batch size and device."""
    return Composite(shape=env.batch_size, device=env.device)


class SpecView:
    """A descriptor exposing one role's spec in one flavour.

    Args:
        role: ``"observation"``, ``"reward"``, ``"done"``, ``"action"`` or ``"state"``.
        full: return the whole ``Composite`` (``full_<role>_spec``) rather than the leaf.
        unbatched: drop the env's batch dims on read, add them on write.
    """

    def __init__(self, role: str, *, full: bool, unbatched: bool = False) -> None:
        self.role = role
        self.full = full
        self.unbatched = unbatched

    def __get__(self, env: Any, owner: type | None = None) -> Any:  # Any: descriptor protocol
        if env is None:
            return self
        spec = env.__dict__[f"_{ROLE_PARENT[self.role]}"][f"full_{self.role}_spec"]
        if not self.full and self.role in LEAF_ROLES:
            keys = env._key_cache()[f"{self.role}_keys"]
            if len(keys) == 1:
                spec = spec[keys[0]]
        return unbatch(spec, env.batch_size) if self.unbatched else spec

    def __set__(self, env: EnvBase, value: TensorSpec) -> None:
        if "_output_spec" not in env.__dict__:  # before EnvBase.__init__: applied by it
            env.__dict__.setdefault("_pending_specs", []).append((self, value))
            return
        if self.unbatched:
            value = value.expand(*env.batch_size, *value.shape)
        if isinstance(value, Composite):
            assign_full_spec(env, self.role, value)
            return
        if self.full or self.role not in WRAPPED_LEAF_ROLES:
            name = f"{'full_' if self.full else ''}{self.role}_spec"
            raise TypeError(
                f"{name} must be a Composite, got {type(value).__name__}. Wrap it: "
                f"Composite({self.role}=spec, shape=env.batch_size)."
            )
        _check_batch(self.role, value, env.batch_size)
        wrapped = Composite({WRAPPED_LEAF_ROLES[self.role]: value}, shape=env.batch_size)
        assign_full_spec(env, self.role, wrapped)


class ParentSpecView:
    """A descriptor for ``input_spec`` / ``output_spec`` (optionally unbatched)."""

    def __init__(self, name: str, *, unbatched: bool = False) -> None:
        self.name = name
        self.unbatched = unbatched

    def __get__(self, env: Any, owner: type | None = None) -> Any:  # Any: descriptor protocol
        if env is None:
            return self
        spec = env.__dict__[f"_{self.name}"]
        return unbatch(spec, env.batch_size) if self.unbatched else spec

    def __set__(self, env: EnvBase, value: Composite) -> None:
        if "_output_spec" not in env.__dict__:  # before EnvBase.__init__: applied by it
            env.__dict__.setdefault("_pending_specs", []).append((self, value))
            return
        if self.unbatched:
            value = value.expand(*env.batch_size, *value.shape)
        assign_parent_spec(env, self.name, value)


def spec_views() -> dict[str, SpecView | ParentSpecView]:
    """Every documented spec accessor, by attribute name, for ``EnvBase``'s namespace."""
    views: dict[str, SpecView | ParentSpecView] = {}
    for role in ROLE_PARENT:
        for unbatched, suffix in ((False, ""), (True, "_unbatched")):
            views[f"{role}_spec{suffix}"] = SpecView(role, full=False, unbatched=unbatched)
            views[f"full_{role}_spec{suffix}"] = SpecView(role, full=True, unbatched=unbatched)
    for parent in PARENT_ROLES:
        views[parent] = ParentSpecView(parent)
        views[f"{parent}_unbatched"] = ParentSpecView(parent, unbatched=True)
    return views


def _sorted_keys(spec: Composite) -> list[NestedKey]:
    keys = list(spec.keys(True, True))
    return sorted(keys, key=lambda k: (0, (k,)) if isinstance(k, str) else (len(k) - 1, k))


def compute_key_cache(env: EnvBase) -> dict[str, Any]:
    """Key lists, leaf specs and done-level structure, computed once per spec assignment."""
    cache: dict[str, Any] = {}
    for role in ROLE_PARENT:
        spec = env.__dict__[f"_{ROLE_PARENT[role]}"][f"full_{role}_spec"]
        keys = _sorted_keys(spec)
        cache[f"{role}_keys"] = keys
        cache[f"{role}_leaves"] = [(key, spec[key]) for key in keys]
    # a pool of envs with different action classes, or heterogeneous agents stacked lazily,
    # have leaves that form no single tensor: their actions are drawn per member, from the
    # composite (whose sample holds lazy stacks)
    cache["action_leafwise"] = not any(
        leaf.dtype is None or isinstance(leaf, Stacked) for _, leaf in cache["action_leaves"]
    )
    levels: dict[tuple, list[NestedKey]] = {}
    for key in cache["done_keys"]:
        levels.setdefault(as_tuple(key)[:-1], []).append(key)
    cache["done_levels"] = levels
    # every done key a top-level name: done completion checks them all with one set
    # comparison per step (see _td.has_entries)
    done_names = frozenset(k for k in cache["done_keys"] if isinstance(k, str))
    cache["done_names"] = done_names if len(done_names) == len(cache["done_keys"]) else None
    cache["reset_keys"] = ["_reset" if not level else (*level, "_reset") for level in levels]
    # "done" is the union of the end-of-trajectory signals of its level: read it alone.
    flags: list[NestedKey] = []
    for keys in levels.values():
        named_done = [k for k in keys if as_tuple(k)[-1] == "done"]
        flags.extend(named_done or keys)
    cache["done_flags"] = flags
    # a reward the env also reads back as a state (an episode sum declared as reward)
    # moves to the next root like any state
    states = frozenset(map(as_tuple, cache["state_keys"]))
    cache["reward_excluded"] = frozenset(map(as_tuple, cache["reward_keys"])) - states
    cache["root_excluded"] = frozenset(
        {("next",), *map(as_tuple, cache["action_keys"]), *map(as_tuple, cache["reward_keys"])}
    )
    cache["dynamic"] = any(
        -1 in tuple(leaf.shape)
        for role in ROLE_PARENT
        for _, leaf in cache[f"{role}_leaves"]
    )
    return cache
