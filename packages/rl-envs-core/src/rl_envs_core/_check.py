"""``check_env_specs``: compare a short rollout with what the specs promise."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import torch
from tensordict import TensorDictBase
from tensordict.utils import is_non_tensor

from rl_envs_core._step_mdp import as_tuple, leaf_keys
from rl_envs_core._validation import shape_matches

if TYPE_CHECKING:
    from rl_envs_core._env_base import EnvBase

_ROLLOUT_STEPS = 3


def _expected(env: EnvBase) -> tuple[dict, dict, set]:
    """(root leaf specs, next leaf specs, optional next keys), keyed by key tuples."""
    root, nxt = {}, {}
    for role, where in (
        ("action", (root,)),
        ("state", (root,)),
        ("observation", (root, nxt)),
        ("done", (root, nxt)),
        ("reward", (nxt,)),
    ):
        spec = getattr(env, f"full_{role}_spec")
        for key in getattr(env, f"{role}_keys"):
            leaf = spec[key]
            if getattr(leaf, "mask", None) is not None:
                # a mask changes along the rollout (ActionMask): values drawn under an
                # earlier mask are checked against the spec's whole domain
                leaf = leaf.clone()
                leaf.update_mask(None)
            for target in where:
                target[as_tuple(key)] = leaf
    optional = {as_tuple(k) for k in env.state_keys} - set(nxt)
    state_spec = env.full_state_spec
    for key in env.state_keys:
        nxt.setdefault(as_tuple(key), state_spec[key])
    return root, nxt, optional


def _fmt(keys: set) -> list[str]:
    return sorted(str(k[0] if len(k) == 1 else k) for k in keys)


def _check_step(
    step: TensorDictBase, index: int, expected: dict, optional: set, where: str, check_dtype: bool
) -> None:
    got = {as_tuple(k): k for k in leaf_keys(step)}
    missing = set(expected) - set(got) - optional
    extra = set(got) - set(expected)
    if missing or extra:
        raise AssertionError(
            f"The keys of the specs and data do not match at {where} (step {index}): "
            f"in the specs only: {_fmt(missing)}; in the data only: {_fmt(extra)}. "
            f"Declare every entry the env returns in its specs, and return every entry "
            f"they declare."
        )
    for tup, key in got.items():
        spec, value = expected[tup], step.get(key)
        if is_non_tensor(value) or not isinstance(value, torch.Tensor):
            continue
        label = f"{where} key {key!r} (step {index})"
        if check_dtype and value.dtype != spec.dtype:
            raise AssertionError(
                f"dtype mismatch at {label}: the spec expects {spec.dtype}, the data has "
                f"{value.dtype}. Make the env return {spec.dtype} or fix the spec dtype."
            )
        if not shape_matches(tuple(spec.shape), tuple(value.shape)):
            raise AssertionError(
                f"shape mismatch at {label}: the spec expects {tuple(spec.shape)}, the "
                f"data has {tuple(value.shape)}. Fix the spec shape (leading dims = "
                f"batch size; -1 for a varying dim) or the returned value."
            )
        if check_dtype and not spec.is_dynamic and not spec.is_in(value):
            raise AssertionError(
                f"value out of the spec's domain at {label}: {type(spec).__name__} with "
                f"shape {tuple(spec.shape)}. Return values inside the spec or widen it."
            )


def check_env_specs(
    env: EnvBase,
    return_contiguous: bool = True,
    check_dtype: bool = True,
    seed: int | None = None,
    tensordict: TensorDictBase | None = None,
    break_when_any_done: bool | Literal["both"] = False,
) -> None:
    """Test an environment's specs against the results of a short rollout.

    A 3-step rollout is compared, step by step, with the specs: the root must hold
    exactly the action, state, observation and done entries; ``"next"`` the
    observation, reward and done entries (state entries are allowed). Shapes (with
    ``-1`` matching any size), dtypes and domains are checked.

    Args:
        env (EnvBase): the env to test.
        return_contiguous (bool, optional): stack the rollout contiguously.
            Defaults to ``True``.
        check_dtype (bool, optional): compare dtypes and domains. Defaults to ``True``.
        seed (int, optional): seed the env first. Defaults to ``None``.
        tensordict (TensorDictBase, optional): the rollout's first input (no reset is
            done then). Defaults to ``None``.
        break_when_any_done (bool or "both", optional): passed to the rollout;
            ``"both"`` runs it both ways. Defaults to ``False``.

    Raises:
        AssertionError: naming the first key whose presence, dtype, shape or value
            disagrees with the specs (expected vs got).

    Examples:
        >>> from rl_envs_core.testing import CountingEnv
        >>> check_env_specs(CountingEnv(batch_size=[2]))
    """
    if break_when_any_done == "both":
        for flag in (True, False):
            check_env_specs(env, return_contiguous, check_dtype, seed, tensordict, flag)
        return
    if seed is not None:
        env.set_seed(seed)
    data = env.rollout(
        _ROLLOUT_STEPS,
        return_contiguous=False,
        tensordict=tensordict.clone() if tensordict is not None else None,
        auto_reset=tensordict is None,
        break_when_any_done=bool(break_when_any_done),
    )
    root_spec, next_spec, optional = _expected(env)
    steps = data.unbind(data.batch_dims - 1)
    for index, step in enumerate(steps):
        nxt = step.get("next")
        _check_step(step.exclude("next"), index, root_spec, set(), "root", check_dtype)
        _check_step(nxt, index, next_spec, optional, "'next'", check_dtype)
    if return_contiguous and not env._key_cache()["dynamic"]:
        try:
            torch.stack(list(steps), 0)
        except (RuntimeError, KeyError) as err:
            raise AssertionError(
                f"The steps of the rollout cannot be stacked contiguously ({err}). Declare "
                f"the dims that vary as -1 in the specs."
            ) from err
