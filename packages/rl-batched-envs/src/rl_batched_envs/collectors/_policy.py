"""How a collector calls its policy: random draws, TensorDict modules, plain callables.

A collector accepts three kinds of policy:

* ``None``: random actions drawn from the env's action spec, a whole batch of draws
  at once (one ``spec.rand`` call per batch instead of one per step);
* a TensorDict-in / TensorDict-out callable (a ``TensorDictModule``,
  :class:`~rl_envs_core.RandomPolicy`, ``env.rand_step``, ...);
* a plain callable whose parameters are named after root observation keys
  (``lambda observation: ...``): it gets those tensors and returns the action (or a
  tuple, one tensor per action key).

The first output of a policy is checked against the action spec (key, shape, dtype)
unless ``trust_policy=True``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import NestedKey, TensorDictBase
from tensordict.nn import TensorDictModuleBase

from rl_envs_core import EnvBase
from rl_envs_core.extension import get_entry, set_entry

Policy = Callable[[TensorDictBase], TensorDictBase]


def _signature_names(policy: Callable) -> list[str] | None:
    """Names of the positional parameters of ``policy`` (``None`` when unknown)."""
    target = policy.forward if isinstance(policy, torch.nn.Module) else policy
    try:
        params = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):
        return None
    names = []
    for param in params:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            return None
        if param.default is param.empty:
            names.append(param.name)
    return names


def as_td_policy(env: EnvBase, policy: Callable) -> tuple[Policy, bool]:
    """Return ``(td_policy, wrapped)``: ``policy`` as a TensorDict-in/out callable.

    A callable whose required parameters are all root observation keys of ``env``
    is wrapped (``wrapped=True``); anything else is taken as TensorDict-in/out.
    """
    if isinstance(policy, TensorDictModuleBase):
        return policy, False
    names = _signature_names(policy)
    obs_names = {key for key in env.observation_keys if isinstance(key, str)}
    if not names or not set(names) <= obs_names:
        return policy, False
    action_keys = list(env.action_keys)

    def run(td: TensorDictBase) -> TensorDictBase:
        values = action_values(
            policy, policy(*[get_entry(td, name) for name in names]), action_keys
        )
        for key, value in zip(action_keys, values):
            set_entry(td, key, value)
        return td

    return run, True


def check_policy_output(
    env: EnvBase, out: object, policy: object, action_keys: Sequence[NestedKey]
) -> None:
    """Check a policy's first output against the env's action spec.

    Raises:
        TypeError: the output is not a tensordict, or an action has the wrong dtype.
        KeyError: an action key is missing (the message lists the keys present).
        ValueError: an action has the wrong shape.
    """
    if not isinstance(out, TensorDictBase):
        raise TypeError(
            f"The collector's policy {policy!r} returned {type(out).__name__}; a "
            f"TensorDict-in/TensorDict-out policy must return the tensordict holding the "
            f"action(s) {list(action_keys)}. Wrap a tensor-valued module in "
            f"tensordict.nn.TensorDictModule(module, in_keys=[...], out_keys=['action'])."
        )
    spec = env.full_action_spec
    for key in action_keys:
        value = out.get(key, None)
        if value is None:
            present = sorted(str(k) for k in out.keys(True, True))
            raise KeyError(
                f"The collector's policy {policy!r} did not write the action key {key!r}. "
                f"Expected a tensor of shape {tuple(spec[key].shape)} and dtype "
                f"{spec[key].dtype} there; got the keys {present}. Make the policy write "
                f"its output at {key!r} (e.g. TensorDictModule(..., out_keys=[{key!r}]))."
            )
        leaf = spec[key]
        if value.shape != leaf.shape:
            raise ValueError(
                f"The collector's policy {policy!r} wrote {key!r} with shape "
                f"{tuple(value.shape)}; the env's action spec expects {tuple(leaf.shape)} "
                f"(env batch size {tuple(env.batch_size)} followed by the action shape). "
                f"Make the policy output one action per env of the batch."
            )
        if value.dtype != leaf.dtype:
            raise TypeError(
                f"The collector's policy {policy!r} wrote {key!r} with dtype {value.dtype}; "
                f"the env's action spec expects {leaf.dtype}. Cast the output (e.g. "
                f"action.to({leaf.dtype})) or change the spec."
            )


class RandomDraws:
    """A batch of random actions, drawn at once from the action spec.

    ``draw(steps)`` samples ``steps`` actions per env in one ``spec.rand`` call per
    action key; ``at(t)`` gives step ``t``'s actions as views.
    """

    def __init__(self, env: EnvBase) -> None:
        spec = env.full_action_spec
        self.leaves: list[tuple[NestedKey, Any]] = [  # Any: a TensorSpec leaf
            (key, spec[key]) for key in env.action_keys
        ]
        self.draws: list[torch.Tensor] = []
        self.rows: list[tuple[torch.Tensor, ...]] = []

    def draw(self, steps: int) -> list[torch.Tensor]:
        """Sample ``steps`` actions per env; each tensor is ``[steps, *batch, *action]``."""
        self.draws = [leaf.rand(torch.Size([steps])) for _, leaf in self.leaves]
        self.rows = [d.unbind(0) for d in self.draws]
        return self.draws

    def write(self, td: TensorDictBase, t: int) -> None:
        """Write step ``t``'s actions into ``td`` (views of the batch of draws)."""
        for (key, _), rows in zip(self.leaves, self.rows):
            set_entry(td, key, rows[t])


def action_values(policy: Callable, out: Any, action_keys: list) -> tuple | list:  # Any: output
    """A plain policy's result as one value per action key.

    Raises:
        ValueError: the policy returned another number of values than there are action keys.
    """
    values = out if isinstance(out, (tuple, list)) else (out,)
    if len(values) != len(action_keys):
        raise ValueError(
            f"The policy {policy!r} returned {len(values)} value(s) but the env has "
            f"{len(action_keys)} action key(s) {action_keys}. Return one tensor per "
            f"action key, in that order."
        )
    return values
