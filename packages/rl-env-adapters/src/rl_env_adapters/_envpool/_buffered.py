"""``PoolStepper``: an EnvPool pool stepped straight into a batch's preallocated tensors.

The ``buffered_stepper`` hook of :class:`~rl_env_adapters.MultiThreadedEnvWrapper`
(see ``rl_envs_core.extension.SupportsBufferedSteps``). The batch's actions are
converted for the pool once (the per-step converter applied to the whole
``[num_envs, T]`` block). A finished env is reset by EnvPool's own auto-reset,
inside the next step call (no reset round trip); that env then makes its step at
the call after, so envs run ahead of one another within the batch. Each env sees
the same sequence of steps and resets as on the general path (its own random
state, seeded per env), so the values are the same.

Two ways to write the calls' outputs: :class:`TimeMajorStepper` (small
observations) keeps each call's arrays and gathers the batch's rows once at the
end (``_time_major.py``), its ``fill_rows`` writing the root entries too and
resetting the envs that finish at their last step by one more auto-reset call;
:class:`PoolStepper` writes each call's arrays into numpy views of the batch's
``"next"`` tensors, and resets the envs that finish at their last step through
the wrapper's :class:`~rl_env_adapters._envpool._resets.PoolResets`, as the
general path does. Both have the per-step mode (``step``) a policy needs, which
resets the envs a step finished right away, by one more call stepping only them
(EnvPool's auto-reset).

Only the plain case is handled: a synchronous pool with one array observation and
one action leaf, ``frame_skip=1``, on the cpu, step and reset not overridden.
Anything else declines (``None``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import torch
from tensordict import TensorDictBase

from rl_env_adapters._envpool._time_major import (
    CallRecord,
    Calls,
    gather_next,
    gather_roots,
    reset_rows,
    step_calls,
)
from rl_envs_core.extension import steps_checked
from rl_specs import Composite, MultiOneHot, NonTensor, OneHot

if TYPE_CHECKING:
    from rl_env_adapters._envpool._env import MultiThreadedEnvWrapper

__all__ = ["PoolStepper", "TimeMajorStepper", "pool_stepper"]

_TEMPLATE = ("step", "next_of", "reset", "_step", "_reset", "_output")
_FLAGS = ("terminated", "truncated", "done")


def pool_stepper(
    env: MultiThreadedEnvWrapper, base: type, batch: TensorDictBase
) -> PoolStepper | None:
    """A :class:`PoolStepper` for ``env`` and ``batch``, or ``None`` when ``env`` is not plain."""
    cls = type(env)
    if (
        not steps_checked(env)  # the first step goes through env.step's checks
        or env.is_async
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
    # the batch's entries are contiguous (BufferedRollout allocates them or checks)
    obs = batch.get(("next", keys[0])).numpy()
    if CallRecord.fits(2 * batch.batch_size[1], env.num_envs, obs.shape[2:], obs.dtype):
        return TimeMajorStepper(env, batch, keys[0])
    return PoolStepper(env, batch, keys[0])


class PoolStepper:
    """Steps a plain synchronous EnvPool pool through one batch (see the module docstring).

    Args:
        env (MultiThreadedEnvWrapper): the env (checked plain by :func:`pool_stepper`).
        batch (TensorDictBase): ``[num_envs, T]`` batch with the actions written.
        key (str): the observation entry.
    """

    def __init__(self, env: MultiThreadedEnvWrapper, batch: TensorDictBase, key: str) -> None:
        self._write_action = env._write_action
        self._action = batch.get("action")  # read when the steps run: fill or step
        nxt = batch.get("next")
        self._key = key
        self._obs = nxt.get(key).numpy()
        n, steps = batch.batch_size
        self._n, self._steps = n, steps
        self._reward = nxt.get("reward").numpy().reshape(n, steps)
        self._flags = [
            nxt.get(name).numpy().reshape(n, steps) for name in ("terminated", "truncated", "done")
        ]
        self._pool = env._env
        self._resets = env._resets
        self._record = env._call_record  # its step: the pool's C++ send / recv (direct_step)

    def fill(self, reset_last: bool = True) -> tuple | None:
        """Step every env ``T`` times; an env that finished is reset by its next step call.

        Each call steps every env that still has steps to make; an env that finished
        at its previous call is reset by this one (EnvPool's auto-reset: its action
        is ignored) and makes its step at the next call, so envs drift apart by one
        call per episode end, and the batch takes ``T`` calls plus the most resets
        any one env made. Each call's outputs are written into the batch rows of the
        envs it stepped.
        """
        n, steps = self._n, self._steps
        actions = np.asarray(self._write_action(self._action))  # [num_envs, T, ...]
        actions = np.ascontiguousarray(np.moveaxis(actions, 1, 0))  # [T, num_envs, ...]
        self._resets.before_step()  # a reset sent before this batch is received first
        pool = self._pool
        obs_out, rewards = self._obs, self._reward
        te_out, tr_out, done_out = self._flags
        cursor = np.zeros(n, dtype=np.int64)  # each env's next time index
        pending = np.zeros(n, dtype=bool)  # finished: the next call resets it
        every = np.arange(n, dtype=np.int32)
        reset_steps, reset_envs, firsts = [], [], []
        while True:
            active = cursor < steps
            if active.all():
                obs, reward, terminated, truncated, info = pool.step(actions[cursor, every])
            elif active.any():
                ids = every[active]
                obs, reward, terminated, truncated, info = pool.step(actions[cursor[ids], ids], ids)
            else:
                break
            got = info["env_id"]
            time = cursor[got]
            was_reset = pending[got]
            if was_reset.any():  # first observations of new episodes: roots, not steps
                fresh = got[was_reset]
                reset_steps.append(time[was_reset] - 1)
                reset_envs.append(fresh)
                firsts.append(obs[was_reset])
                pending[fresh] = False
                stepped = ~was_reset
                got, time = got[stepped], time[stepped]
                obs, reward = obs[stepped], reward[stepped]
                terminated, truncated = terminated[stepped], truncated[stepped]
            done = terminated | truncated
            obs_out[got, time] = obs
            rewards[got, time] = reward
            te_out[got, time] = terminated
            tr_out[got, time] = truncated
            done_out[got, time] = done
            cursor[got] = time + 1
            pending[got] = done
        if pending.any():  # finished at their last step: reset as the general path does
            self._resets.after_step(pending.copy())
            if reset_last:
                values = self._resets.reset(pending)
                value = values[self._key] if isinstance(values, dict) else values
                last = every[pending]
                reset_steps.append(np.full(len(last), steps - 1))
                reset_envs.append(last)
                firsts.append(np.asarray(value)[last])
        if not reset_steps:
            return None
        return (
            torch.from_numpy(np.concatenate(reset_steps)),
            torch.from_numpy(np.concatenate(reset_envs).astype(np.int64)),
            {self._key: torch.as_tensor(np.concatenate(firsts))},
        )

    def step(self, t: int) -> tuple | None:
        """Step every env once with the actions at ``t``; reset the envs that finished.

        The per-step mode (``BufferedStepper.step``): the actions are read now, so a
        policy may write them just before. The finished envs are reset at once, as
        the general path resets them after a step, by one more call stepping only
        them (EnvPool's auto-reset: their actions ignored, their first observations
        returned): the same reset as ``pool.reset(ids)``, without its Python layers.
        Returns the resets, as :meth:`fill` does.
        """
        self._resets.before_step()
        record = self._record
        actions = np.ascontiguousarray(
            self._write_action(self._action[:, t]), dtype=record.action_dtype
        )
        obs, reward, done, truncated = record.step(actions, None)
        self._obs[:, t] = obs
        self._reward[:, t] = reward
        te_out, tr_out, done_out = self._flags
        np.greater(done, truncated, out=te_out[:, t])  # terminated: done, not by truncation
        tr_out[:, t] = truncated
        done_out[:, t] = done
        if not done.any():
            return None
        envs = np.flatnonzero(done)
        # a sync pool answers in the order of the env ids sent
        first = record.step(actions[envs], envs.astype(np.int32))[0]
        return (
            torch.full((len(envs),), t, dtype=torch.long),
            torch.from_numpy(envs.astype(np.int64)),
            {self._key: torch.as_tensor(np.asarray(first))},
        )


class TimeMajorStepper(PoolStepper):
    """A :class:`PoolStepper` whose ``fill`` records the calls first (``_time_major.py``).

    Chosen by :func:`pool_stepper` where the call-major buffers stay small (small
    observations). ``fill_rows`` (``BufferedStepper``'s optional method) also writes
    the batch's root entries, from the same gather; ``step``, the per-step mode, is
    :class:`PoolStepper`'s.
    """

    def __init__(self, env: MultiThreadedEnvWrapper, batch: TensorDictBase, key: str) -> None:
        super().__init__(env, batch, key)
        self._batch = batch

    def _run(self, reset_last: bool) -> Calls:
        """Step the batch into the call-major buffers, their row 0 already written."""
        calls = step_calls(self._actions, self._record, reset_last=reset_last)
        gather_next(self._record, calls, (self._obs, self._reward, *self._flags))
        if calls.pending.any():  # finished at their last step, not reset (reset_last=False)
            self._resets.after_step(calls.pending)
        return calls

    def _start(self) -> np.ndarray:
        """The actions, the resets owed received, the buffers sized: their observations."""
        self._actions = np.asarray(self._write_action(self._action))  # [num_envs, T, ...]
        self._resets.before_step()  # a reset sent before this batch is received first
        obs = self._obs
        record = self._record.buffers(
            2 * self._steps, self._n, obs.shape[2:], obs.dtype, self._reward.dtype
        )
        return record[0]

    def fill(self, reset_last: bool = True) -> tuple | None:
        """:meth:`PoolStepper.fill`'s data, recorded call by call and gathered at the end."""
        self._start()
        calls = self._run(reset_last)
        if not calls.resets.any():
            return None
        steps, envs, obs = reset_rows(self._record, calls)
        return (
            torch.from_numpy(steps),
            torch.from_numpy(envs),
            {self._key: torch.from_numpy(obs)},
        )

    def fill_rows(self, carry: Mapping[str, torch.Tensor], reset_last: bool = True) -> dict:
        """:meth:`fill`, and the root entries of every step; the next root's entries.

        The root observation of a step is the output of its env's call before; the
        root done flags are ``False`` after the first step (every finished env is
        reset before its next step) and ``carry``'s at the first.
        """
        self._start()[0] = np.asarray(carry[self._key])
        calls = self._run(reset_last)
        root_obs = self._batch.get(self._key).numpy()
        following = {self._key: torch.from_numpy(gather_roots(self._record, calls, root_obs))}
        nxt = self._batch.get("next")
        for name, value in carry.items():
            if name == self._key:
                continue
            if name not in _FLAGS:
                raise RuntimeError(
                    f"EnvPool's in-place path writes the root entries {[self._key, *_FLAGS]}, "
                    f"got a carried entry {name!r}. This is a bug: please report it."
                )
            root = self._batch.get(name)
            root.zero_()
            root[:, 0] = value
            last = nxt.get(name)[:, -1]
            following[name] = torch.zeros_like(last) if reset_last else last.clone()
        return following
