"""``PoolStepper``: an EnvPool pool stepped straight into a batch's preallocated tensors.

The ``buffered_stepper`` hook of :class:`~rl_env_adapters.MultiThreadedEnvWrapper`
(see ``rl_envs_core.extension.SupportsBufferedSteps``). The batch's actions are
converted for the pool once (the per-step converter applied to the whole
``[num_envs, T]`` block, laid out time-major so that each step's actions are one
contiguous array); each step writes EnvPool's batched arrays into numpy views of
the batch's ``"next"`` tensors. Resets go through the wrapper's own
:class:`~rl_env_adapters._envpool._resets.PoolResets` in the same order as the
general path (reset sent as soon as the step returns, received when asked for),
so the pool sees the same calls and gives the same values.

Only the plain case is handled: a synchronous pool with one array observation and
one action leaf, ``frame_skip=1``, on the cpu, step and reset not overridden.
Anything else declines (``None``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from tensordict import TensorDictBase

from rl_specs import Composite, MultiOneHot, NonTensor, OneHot

if TYPE_CHECKING:
    from rl_env_adapters._envpool._env import MultiThreadedEnvWrapper

__all__ = ["PoolStepper", "pool_stepper"]

# Any in this module: EnvPool arrays are library-defined.

_TEMPLATE = ("step", "next_of", "reset", "_step", "_reset", "_output")


def pool_stepper(
    env: MultiThreadedEnvWrapper, base: type, batch: TensorDictBase
) -> PoolStepper | None:
    """A :class:`PoolStepper` for ``env`` and ``batch``, or ``None`` when ``env`` is not plain."""
    cls = type(env)
    if (
        env.is_async
        or env.frame_skip != 1
        or env.auto_reset_handler is not None
        or (env.device is not None and env.device.type != "cpu")
        or any(getattr(cls, name) is not getattr(base, name) for name in _TEMPLATE)
    ):
        return None
    obs_spec = env.full_observation_spec
    keys = list(obs_spec.keys())
    if len(keys) != 1 or not isinstance(keys[0], str):
        return None
    if isinstance(obs_spec[keys[0]], (Composite, NonTensor, OneHot, MultiOneHot)):
        return None
    if list(env.full_action_spec.keys()) != ["action"]:
        return None
    if isinstance(env.full_action_spec["action"], (Composite, NonTensor)):
        return None
    return PoolStepper(env, batch, keys[0])


class PoolStepper:
    """Steps a plain synchronous EnvPool pool for one batch (see the module docstring).

    Args:
        env (MultiThreadedEnvWrapper): the env (checked plain by :func:`pool_stepper`).
        batch (TensorDictBase): ``[num_envs, T]`` batch with the actions written.
        key (str): the observation entry.
    """

    def __init__(self, env: MultiThreadedEnvWrapper, batch: TensorDictBase, key: str) -> None:
        actions = np.asarray(env._write_action(batch.get("action")))  # [num_envs, T, ...]
        self._actions = np.ascontiguousarray(np.moveaxis(actions, 1, 0))  # [T, num_envs, ...]
        nxt = batch.get("next")
        self._key = key
        self._obs = nxt.get(key).numpy()
        n, steps = batch.batch_size
        self._reward = nxt.get("reward").numpy().reshape(n, steps)
        self._flags = [
            nxt.get(name).numpy().reshape(n, steps) for name in ("terminated", "truncated", "done")
        ]
        self._pool_step = env._env.step
        self._resets = env._resets
        self._done: np.ndarray | None = None

    def step(self, t: int) -> bool:
        """Step every env with the actions of time ``t``; write it; whether some env finished."""
        resets = self._resets
        resets.before_step()  # envs finished and not reset since start from a reset
        obs, reward, terminated, truncated, _ = self._pool_step(self._actions[t])
        done = terminated | truncated
        resets.after_step(done.copy())
        self._obs[:, t] = obs
        self._reward[:, t] = reward
        te, tr, dn = self._flags
        te[:, t], tr[:, t], dn[:, t] = terminated, truncated, done
        self._done = done
        return bool(done.any())

    def reset(self) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset the envs the last step finished; their first observations (every row)."""
        done = self._done
        values = self._resets.reset(done)
        value = values[self._key] if isinstance(values, dict) else values
        if not isinstance(value, torch.Tensor):
            value = torch.as_tensor(np.asarray(value))
        return done, {self._key: value}
