"""``EnvBase.rollout`` and ``EnvBase.step_and_maybe_reset`` as plain functions.

The loop keeps per-step work to the step itself, one ``"next"``-to-root copy and
one done check; the collected steps are stacked along a trailing dimension named
``"time"`` (by chunks while the rollout runs, see ``_stack.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from tensordict import TensorDictBase

from rl_envs_core._buffered import BufferedRollout
from rl_envs_core._stack import RolloutSteps
from rl_envs_core._step_mdp import aggregate_done, as_tuple
from rl_envs_core._td import any_true, get_entry

if TYPE_CHECKING:
    from rl_envs_core._env_base import EnvBase

Policy = Callable[[TensorDictBase], TensorDictBase]


def resolve_break_flags(any_done: bool | None, all_done: bool | None) -> tuple[bool, bool]:
    """Defaults of the two break flags: break at the first done unless told otherwise."""
    if any_done and all_done:
        raise ValueError(
            "rollout() got break_when_any_done=True and break_when_all_done=True; "
            "they are exclusive. Pass only one of them."
        )
    if all_done:
        return False, True
    return (True if any_done is None else bool(any_done)), False


def step_and_maybe_reset(
    env: EnvBase, tensordict: TensorDictBase
) -> tuple[TensorDictBase, TensorDictBase]:
    """Step ``env``, move to the next root and reset (partially) where done."""
    tensordict = env.step(tensordict)
    return tensordict, advance_and_maybe_reset(env, tensordict)


def done_somewhere(data: TensorDictBase, flags: list) -> bool:
    """Whether any of the ``flags`` entries (the ``"done"`` of each level) is ``True``."""
    for key in flags:
        value = get_entry(data, key)
        if value is not None and any_true(value):
            return True
    return False


def maybe_reset(env: EnvBase, tensordict: TensorDictBase) -> TensorDictBase:
    """Partially reset ``tensordict`` where its done flags are set; return it."""
    cache = env.__dict__["_cache"] or env._key_cache()  # once per step: no call when built
    if done_somewhere(tensordict, cache["done_flags"]) and aggregate_done(
        tensordict, cache["done_levels"], "_reset", False
    ):
        env.reset(tensordict)
    return tensordict


def advance_and_maybe_reset(env: EnvBase, tensordict: TensorDictBase) -> TensorDictBase:
    """``step_mdp`` of ``tensordict``, then a partial reset of the done elements."""
    return maybe_reset(env, env._step_mdp(tensordict))


def batch_done(env: EnvBase, data: TensorDictBase) -> torch.Tensor:
    """One flag per batch element: is any done-like entry ``True`` there."""
    batch = data.batch_size
    flags = torch.zeros(batch, dtype=torch.bool, device=data.device)
    for key in env._key_cache()["done_keys"]:
        value = data.get(key, None)
        if value is not None:
            flags |= value.reshape(*batch, -1).any(-1)
    return flags


def _device_policy(env: EnvBase, policy: Policy) -> Policy:
    params = list(policy.parameters()) if isinstance(policy, torch.nn.Module) else []
    if not params:
        return policy
    device = params[0].device

    def run(td: TensorDictBase) -> TensorDictBase:
        return policy(td.to(device)).to(env.device if env.device is not None else td.device)

    return run


def _merge_policy_output(td: TensorDictBase, out: TensorDictBase | None) -> TensorDictBase:
    """``td`` with what a policy returned merged in, when that is not ``td`` itself.

    A policy returning ``None`` wrote into ``td``; one returning another tensordict
    has its entries written into ``td``. The rollout loop calls this only when the
    policy's result is not ``td`` (the common case costs no call).
    """
    if out is None:
        return td
    if not isinstance(out, TensorDictBase):
        raise TypeError(
            f"rollout() expected the policy to return a tensordict, got "
            f"{type(out).__name__}. Return the input tensordict with the action written "
            f"into it (or a tensordict holding the action)."
        )
    return td.update(out)


def _mark_truncated(env: EnvBase, data: TensorDictBase) -> None:
    last = data[..., -1]
    for level, keys in env._key_cache()["done_levels"].items():
        names = {as_tuple(k)[-1] for k in keys}
        for name in ("truncated", "done") if "truncated" in names else ():
            key = ("next", *level, name)
            last.set_(key, torch.ones_like(last.get(key)))


def _stack(env: EnvBase, steps: RolloutSteps, out: TensorDictBase | None) -> TensorDictBase:
    try:
        result = steps.stack("time")
    except RuntimeError as err:
        if env._key_cache()["dynamic"]:
            raise RuntimeError(
                f"rollout() could not stack the steps into one contiguous tensordict: "
                f"the environment specs are dynamic (a dim declared -1), so shapes vary "
                f"between steps ({err}). Call rollout(..., return_contiguous=False) for "
                f"a lazy stack, or return_contiguous=None to pick it from the specs."
            ) from err
        raise RuntimeError(
            f"rollout() could not stack the steps into one contiguous tensordict "
            f"({err}). Keys or shapes vary between steps: start from a tensordict "
            f"holding every entry of env.reset(), declare varying dims as -1 in the "
            f"specs, or call rollout(..., return_contiguous=False)."
        ) from err
    names = [None] * steps.dim + ["time"]
    if result.names != names:  # a lazy stack of unnamed steps is named already
        result.names = names
    if out is not None:
        out.update(result)
        return out
    return result


#: action specs whose ``rand(shape)`` draws, in one call, the numbers of as many
#: successive ``rand()`` calls (so a batch of draws leaves the generator as the steps would)
_BATCHED_DRAW_EXACT = frozenset(
    {
        "OneHot",
        "Categorical",
        "Binary",
        "MultiCategorical",
        "Bounded",
        "BoundedContinuous",
        "BoundedDiscrete",
    }
)


def _engine(env: EnvBase) -> BufferedRollout | None:
    """The env's in-place engine, when a batch of random draws equals per-step draws."""
    engine = BufferedRollout.cached(env)
    if engine is None:
        return None
    keys = env._key_cache()
    leaves = keys["action_leaves"]
    if len(leaves) != 1 or not keys["action_leafwise"]:
        return None
    leaf = leaves[0][1]
    if type(leaf).__name__ not in _BATCHED_DRAW_EXACT or getattr(leaf, "mask", None) is not None:
        return None
    return engine


def _buffered_rollout(env: EnvBase, td: TensorDictBase, max_steps: int) -> TensorDictBase | None:
    """A random-action rollout of every step written in place (see ``_buffered.py``).

    The actions of all steps are drawn at once (for the specs of
    ``_BATCHED_DRAW_EXACT`` the same numbers the per-step draws give) and the env's
    stepper writes each step into the preallocated result. ``None`` when the env
    has no stepper or declines: nothing was drawn or stepped then.
    """
    engine = _engine(env)
    if engine is None or td.batch_size != env.batch_size:
        return None
    batch = engine.allocate(max_steps)
    key, leaf = env._key_cache()["action_leaves"][0]
    state = torch.get_rng_state()
    draw = leaf.rand(torch.Size([max_steps]))
    batch.get(key).copy_(draw.movedim(0, engine.dim) if engine.dim else draw)
    if engine.run(td, batch, reset_last=False) is None:
        torch.set_rng_state(state)  # as if nothing was drawn
        return None
    return batch


def rollout(
    env: EnvBase,
    max_steps: int,
    policy: Policy | None = None,
    callback: Callable[[EnvBase, TensorDictBase], Any] | None = None,  # Any: ignored result
    *,
    auto_reset: bool = True,
    auto_cast_to_device: bool = False,
    break_when_any_done: bool | None = None,
    break_when_all_done: bool | None = None,
    return_contiguous: bool | None = None,
    tensordict: TensorDictBase | None = None,
    set_truncated: bool = False,
    out: TensorDictBase | None = None,
    trust_policy: bool = False,
) -> TensorDictBase:
    """Run ``env`` for up to ``max_steps`` steps; see :meth:`EnvBase.rollout`."""
    any_done, all_done = resolve_break_flags(break_when_any_done, break_when_all_done)
    if max_steps < 1:
        raise ValueError(f"rollout() expected max_steps >= 1, got {max_steps}.")
    if not env.is_spec_locked:
        env.empty_cache()
    cache = env._key_cache()
    if set_truncated and not any(as_tuple(k)[-1] == "truncated" for k in cache["done_keys"]):
        raise RuntimeError(
            f"rollout(set_truncated=True) needs a 'truncated' entry in the done spec; the "
            f"env has {[str(k) for k in cache['done_keys']]}. Add one to env.full_done_spec."
        )
    if auto_reset:
        td = env.reset(tensordict) if tensordict is not None else env.reset()
    elif tensordict is None:
        raise ValueError(
            "rollout(auto_reset=False) needs a tensordict to start from; got none. Pass "
            "tensordict=env.reset() (or the last step of a previous rollout)."
        )
    else:
        td = maybe_reset(env, tensordict)
    if (
        policy is None
        and callback is None
        and not any_done
        and not all_done
        and return_contiguous is not False
    ):
        result = _buffered_rollout(env, td, max_steps)
        if result is not None:
            if out is not None:
                result = out.update(result)
            if set_truncated:
                _mark_truncated(env, result)
            return result
    if policy is None:
        act: Policy = env.rand_action
    elif auto_cast_to_device and not trust_policy:
        act = _device_policy(env, policy)
    else:
        act = policy
    flags = cache["done_flags"]
    # stacked by chunks as they come (see _stack.py): fewer objects kept alive
    if return_contiguous is None:  # contiguous unless a spec has a dynamic (-1) dim
        return_contiguous = not cache["dynamic"]
    steps = RolloutSteps(lazy=not return_contiguous)
    # bound once per rollout: the loop below runs once per step
    step, step_mdp, append = env.step, env._step_mdp, steps.append
    finished = None
    for i in range(max_steps):
        acted = act(td)
        if acted is not td:  # a policy that returned another tensordict (or None)
            td = _merge_policy_output(td, acted)
        if finished is not None:
            td.set("_step", ~finished)
        td = step(td)
        if finished is not None:
            td.del_("_step")
        append(td)
        if callback is not None:
            callback(env, td)
        last = i == max_steps - 1
        if any_done:
            if last or done_somewhere(td.get("next"), flags):
                break
            td = step_mdp(td)
        elif all_done:
            done = batch_done(env, td.get("next"))
            finished = done if finished is None else finished | done
            if last or bool(finished.all()):
                break
            td = step_mdp(td)
        else:
            if last:
                break
            td = maybe_reset(env, step_mdp(td))  # advance_and_maybe_reset(env, td), inlined
    result = _stack(env, steps, out)
    if set_truncated:
        _mark_truncated(env, result)
    return result
