"""Input/output validation of ``EnvBase.step``, run once (or on every step when asked).

The first step of an env (and every step when ``run_type_checks=True``) checks the
actions against ``full_action_spec`` and the ``_step`` output against the output
specs. Later steps pay nothing; when ``_step`` fails, the input check runs again to
turn the backend's error into one that names the key, shapes and the fix.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import torch
from tensordict import TensorDictBase
from tensordict.utils import is_non_tensor

from rl_envs_core._step_mdp import as_tuple, leaf_keys
from rl_specs import Stacked

if TYPE_CHECKING:
    from rl_envs_core._env_base import EnvBase


def shape_matches(expected: tuple[int, ...], actual: tuple[int, ...]) -> bool:
    """Equal shapes, where ``-1`` in ``expected`` matches any size."""
    return len(expected) == len(actual) and all(e in (-1, a) for e, a in zip(expected, actual))


def expected_shape(env: EnvBase, spec_shape: torch.Size, data: TensorDictBase) -> tuple[int, ...]:
    """The shape an entry must have in ``data`` (batch-unlocked envs prepend its batch)."""
    if env.batch_locked:
        return tuple(spec_shape)
    lead = data.batch_size[: data.batch_dims - len(env.batch_size)]
    return (*lead, *spec_shape)


def check_step_input(
    env: EnvBase, tensordict: TensorDictBase, cause: BaseException | None = None
) -> None:
    """Raise a clear error if an action is missing, mis-shaped or (when checking) invalid.

    Raises:
        KeyError: an action key is missing.
        ValueError: an action has the wrong shape, or is outside its spec while
            ``run_type_checks`` is on.
        TypeError: an action has the wrong dtype while ``run_type_checks`` is on.
    """
    if env.batch_locked and tensordict.batch_size != env.batch_size:
        raise ValueError(
            f"Expected a tensordict with batch size {tuple(env.batch_size)} (the env's "
            f"batch_size), got {tuple(tensordict.batch_size)}. Build the input with "
            f"env.reset() or TensorDict(..., batch_size=env.batch_size)."
        ) from cause
    spec = env.full_action_spec
    for key in env._key_cache()["action_keys"]:
        leaf = spec[key]
        if isinstance(leaf, Stacked):
            # heterogeneous members: the entry lives in a lazy stack and has no single
            # shape; check it is there without densifying it
            if as_tuple(key) not in {as_tuple(k) for k in tensordict.keys(True, True)}:
                raise KeyError(
                    f"step() expected an action at key {key!r}, got none. Entries present: "
                    f"{sorted(map(str, tensordict.keys(True, True)))}. Write the action "
                    f"(env.rand_action(td) draws one per member)."
                ) from cause
            continue
        value = tensordict.get(key, None)
        if value is None:
            raise KeyError(
                f"step() expected an action at key {key!r}, got none. Entries present: "
                f"{sorted(map(str, tensordict.keys(True, True)))}. Write the action with "
                f"td[{key!r}] = ... (or call env.rand_action(td) first)."
            ) from cause
        if is_non_tensor(value):
            continue
        shape = expected_shape(env, leaf.shape, tensordict)
        # an action holding exactly the spec's number of elements in another shape (a
        # scalar for a (1,) spec) is the policy's choice: the env's _step receives it as is
        if not shape_matches(shape, tuple(value.shape)) and (
            -1 in shape or value.numel() != torch.Size(shape).numel()
        ):
            raise ValueError(
                f"The action at key {key!r} should have shape {shape}, got "
                f"{tuple(value.shape)}. Fix the policy output (for a batched env the "
                f"leading dims are env.batch_size={tuple(env.batch_size)})."
            ) from cause
        if env.run_type_checks:
            if value.dtype != leaf.dtype:
                raise TypeError(
                    f"The action at key {key!r} should have dtype {leaf.dtype}, got "
                    f"{value.dtype}. Cast it: td[{key!r}] = action.to({leaf.dtype})."
                ) from cause
            if not leaf.is_in(value):
                raise ValueError(
                    f"The action at key {key!r} is outside its spec {type(leaf).__name__} "
                    f"(shape {tuple(leaf.shape)}, dtype {leaf.dtype}). Project it first, "
                    f"e.g. with env.action_spec.project(action)."
                ) from cause


def _declared(env: EnvBase) -> dict[tuple[str, ...], object]:
    out = {}
    for role in ("observation", "reward", "done", "state"):
        spec = getattr(env, f"full_{role}_spec")
        for key in env._key_cache()[f"{role}_keys"]:
            out[as_tuple(key)] = spec[key]
    return out


def fit_done_shapes(env: EnvBase, out: TensorDictBase) -> bool:
    """Reshape done entries that hold the right number of flags in another shape.

    A ``_step`` may return ``done=False`` (a scalar) for a done spec of shape ``(1,)``;
    the flag is reshaped to the spec's shape. Returns whether any entry was reshaped.
    """
    reshaped = False
    for key, leaf in env._done_leaf_specs():
        value = out.get(key, None)
        if not isinstance(value, torch.Tensor) or is_non_tensor(value):
            continue
        shape = expected_shape(env, leaf.shape, out)
        if -1 in shape or tuple(value.shape) == shape:
            continue
        if value.numel() == torch.Size(shape).numel():
            out.set(key, value.reshape(shape))
            reshaped = True
    return reshaped


def check_step_output(env: EnvBase, tensordict: TensorDictBase, out: TensorDictBase) -> None:
    """Raise a clear error if ``_step`` returned undeclared, missing or mis-shaped entries.

    Raises:
        KeyError: ``_step`` returned keys the specs do not declare, or omitted
            declared ones.
        ValueError: an entry's shape does not match its spec.
    """
    declared = _declared(env)
    got = {as_tuple(k): k for k in leaf_keys(out)}
    undeclared = sorted(str(got[k]) for k in got if k not in declared)
    if undeclared:
        raise KeyError(
            f"{type(env).__name__}._step returned entries its specs do not declare: "
            f"{undeclared}. Declared: {_names(declared)}. Add them to "
            f"env.observation_spec (or reward/done spec), or stop returning them."
        )
    state = {as_tuple(k) for k in env._key_cache()["state_keys"]}
    missing = _names(k for k in declared if k not in got and k not in state)
    if missing:
        raise KeyError(
            f"{type(env).__name__}._step did not return the declared entries {missing}. "
            f"Return them from _step, or remove them from the specs."
        )
    for tup, leaf in declared.items():
        if tup not in got or isinstance(leaf, Stacked):
            continue  # a lazily stacked entry has one shape per member, checked by its spec
        value = out.get(got[tup])
        if is_non_tensor(value) or not isinstance(value, torch.Tensor):
            continue
        shape = expected_shape(env, leaf.shape, tensordict)
        if not shape_matches(shape, tuple(value.shape)):
            raise ValueError(
                f"{type(env).__name__}._step returned {got[tup]!r} with shape "
                f"{tuple(value.shape)}, but its spec says {shape}. Fix the spec's shape "
                f"or the value returned by _step."
            )


def _names(keys: Iterable[tuple[str, ...]]) -> list[str]:
    """Printable names of key tuples, for error messages."""
    return sorted(k[0] if len(k) == 1 else str(k) for k in keys)
