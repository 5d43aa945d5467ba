"""What distributions above rl-envs-core need from it: its one documented doorway.

Not part of the TorchRL-documented API (so not in ``rl_envs_core.__all__``), but
public and stable for sibling distributions (``rl-transforms``,
``rl-batched-envs``, ``rl-env-adapters``), which import nothing else of
rl-envs-core beyond ``rl_envs_core.__all__``:

- **stepping a wrapped env**: :func:`next_of` (the one function a batched env or
  a wrapper steps a sub-env with; equal to what ``EnvBase.step`` writes under
  ``"next"``, done completion and auto-reset included), :func:`complete_done`,
  :func:`done_dual`, :func:`advance_root`;
- **specs and keys**: :func:`install_stacked_specs` (a batched env takes its
  sub-envs' stacked specs), :func:`key_layout` (an env's key lists, computed once
  per spec assignment);
- **fast entry access** for per-step code on plain ``TensorDict`` s:
  :func:`entries`, :func:`get_entry`, :func:`set_entry`, :func:`set_child`,
  :func:`new_unchecked`, :func:`any_true` (rl-envs-core's ``_td`` module is the one
  place tensordict's private API is used; siblings use these instead);
- **auto-reset**: :class:`CarryOverAutoReset`, the one engine behind
  ``EnvBase(auto_reset=True)`` and rl-transforms' ``AutoResetTransform``, and the
  :class:`AutoResetHandler` protocol;
- **in-place steps** (the collectors' and ``rollout``'s fast path):
  :class:`SupportsBufferedSteps` (the optional ``buffered_stepper(batch)`` method
  an adapter implements to write its backend's arrays straight into a batch's
  tensors), :class:`BufferedStepper` (what it returns) and
  :class:`BufferedRollout` (the engine that allocates the batch from the specs,
  runs the stepper and fills the root entries; :meth:`BufferedRollout.start` gives a
  :class:`StepByStep` run, one step at a time, for a policy acting between steps),
  :func:`stepwise` (whether a stepper has that per-step mode), :func:`writes_rows`
  (whether it also writes the root entries), :func:`steps_checked`
  (whether a stepper may skip the checks of ``env.step``);
- **registries filled by a higher package**: :func:`register_transformed_env_factory`
  (behind ``EnvBase.append_transform``) and :func:`register_parallel_env_factory`
  with :func:`make_parallel_env` (rl-batched-envs' ``ParallelEnv``, which env
  wrappers such as ``GymEnv(..., num_workers=n)`` build).

Examples:
    >>> from rl_envs_core.extension import key_layout, next_of
    >>> from rl_envs_core.testing import CountingEnv
    >>> env = CountingEnv()
    >>> key_layout(env)["done_keys"]
    ['done', 'terminated']
    >>> next_of(env, env.rand_action(env.reset()))["observation"]
    tensor([1.])
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from tensordict import NestedKey, TensorDictBase

from rl_envs_core import _done
from rl_envs_core._auto_reset import AutoResetHandler, CarryOverAutoReset
from rl_envs_core._batch_hook import make_parallel_env, register_parallel_env_factory
from rl_envs_core._buffered import (
    BufferedRollout,
    BufferedStepper,
    StepByStep,
    SupportsBufferedSteps,
    stepwise,
    writes_rows,
)
from rl_envs_core._spec_views import done_dual, install_stacked_specs
from rl_envs_core._td import any_true, entries, get_entry, new_unchecked, set_child, set_entry
from rl_envs_core._transform_hook import register_transformed_env_factory

if TYPE_CHECKING:
    from rl_envs_core._env_base import EnvBase

__all__ = [
    "AutoResetHandler",
    "BufferedRollout",
    "BufferedStepper",
    "CarryOverAutoReset",
    "StepByStep",
    "SupportsBufferedSteps",
    "advance_root",
    "any_true",
    "complete_done",
    "done_dual",
    "entries",
    "get_entry",
    "install_stacked_specs",
    "key_layout",
    "make_parallel_env",
    "new_unchecked",
    "next_of",
    "register_parallel_env_factory",
    "register_transformed_env_factory",
    "set_child",
    "set_entry",
    "steps_checked",
    "stepwise",
    "writes_rows",
]


def key_layout(env: EnvBase) -> Mapping[str, Any]:  # Any: lists, sets and flags
    """The key layout of ``env``, read-only, computed once per spec assignment.

    Fields: ``"<role>_keys"`` and ``"<role>_leaves"`` (``(key, leaf spec)`` pairs)
    for each role (``observation``, ``reward``, ``done``, ``action``, ``state``);
    ``"done_levels"`` (nesting level -> done keys), ``"reset_keys"`` (one
    ``"_reset"`` per level), ``"done_flags"``, ``"root_excluded"`` /
    ``"reward_excluded"`` (what ``step_mdp`` drops), ``"action_leafwise"`` and
    ``"dynamic"`` (some spec has a ``-1`` dim).

    Examples:
        >>> from rl_envs_core.testing import CountingEnv
        >>> layout = key_layout(CountingEnv())
        >>> layout["reset_keys"], layout["dynamic"]
        (['_reset'], False)
    """
    return MappingProxyType(env._key_cache())


def next_of(env: EnvBase, tensordict: TensorDictBase) -> TensorDictBase:
    """Step ``env`` on ``tensordict`` and return what ``env.step`` writes under ``"next"``.

    The one way a batched env or a wrapper steps a sub-env: input checks, partial
    steps (a ``"_step"`` mask), done completion (a lone ``done`` or ``terminated``
    gets its twin), the device cast and an auto-resetting env's handler all run,
    exactly as in ``env.step``; nothing is written into ``tensordict``.

    Examples:
        >>> from rl_envs_core.testing import CountingEnv
        >>> env = CountingEnv()
        >>> data = env.rand_action(env.reset())
        >>> sorted(next_of(env, data).keys()) == sorted(env.step(data)["next"].keys())
        True
    """
    return env.next_of(tensordict)


def complete_done(
    env: EnvBase, tensordict: TensorDictBase, *, fill_zeros: bool = False
) -> list[NestedKey]:
    """Give every done entry ``env`` declares a value in ``tensordict`` (in place).

    A lone ``done`` or ``terminated`` is copied to its missing twin (see
    :func:`done_dual`); with ``fill_zeros`` the entries still missing are zeros.
    Returns the keys that hold zeros written here.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rl_envs_core.testing import CountingEnv
        >>> td = TensorDict({"terminated": torch.tensor([True])}, [])
        >>> complete_done(CountingEnv().add_truncated_keys(), td, fill_zeros=True)
        ['truncated']
        >>> td["done"]
        tensor([True])
    """
    return _done.complete_done(env, tensordict, fill_zeros=fill_zeros)


def steps_checked(env: EnvBase) -> bool:
    """Whether ``env``'s steps may skip the input/output checks of ``env.step``.

    ``True`` once a first step went through them (``env.step`` checks the action
    and the declared outputs once) and unless ``run_type_checks`` asks for them at
    every step. A ``buffered_stepper`` declines until then, so that a bad env
    fails with the checks' clear error rather than a bad write.

    Examples:
        >>> from rl_envs_core.testing import CountingEnv
        >>> env = CountingEnv()
        >>> steps_checked(env)
        False
        >>> _ = env.rand_step(env.reset())
        >>> steps_checked(env)
        True
    """
    return bool(env._io_checked) and not env.run_type_checks


def advance_root(env: EnvBase, tensordict: TensorDictBase) -> TensorDictBase:
    """``step_mdp(tensordict)`` with ``env``'s keys: the root of the next step.

    Examples:
        >>> from rl_envs_core.testing import CountingEnv
        >>> env = CountingEnv()
        >>> advance_root(env, env.rand_step(env.reset()))["observation"]
        tensor([1.])
    """
    return env._step_mdp(tensordict)
