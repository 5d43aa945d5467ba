"""A batch of EnvPool steps recorded call by call, then gathered into ``[env, time]`` rows.

The time-major branch of the EnvPool stepper (``_buffered.py``), for batches whose
actions are all known in advance (random actions). An env that finished is reset
by EnvPool's auto-reset inside its next call (its action ignored): that call is a
reset call, its observation the root of the env's next transition. While every
env still has work, each call steps all envs and its outputs are kept as EnvPool
returns them (no indexing per call), then stacked once into call-major buffers
(:class:`CallRecord`: ``[K + 1, n, ...]`` observations, row 0 the batch's first
root, ``[K, n]`` rewards and flags); then only the envs short of their ``T``
transitions (or owing the reset of a last-step finish) are stepped, by env id. At
the end, one vectorised gather (the calls that were not reset calls, env-major, in
call order) writes the batch's rows: each env's ``T`` consecutive transitions,
their ``"next"`` entries from the call's outputs and their root observations from
the env's call before (or the first root).

Each env sees the steps and resets the general path gives it (its own random state,
seeded per env), so the data are the same, bit for bit.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "CallRecord",
    "Calls",
    "direct_step",
    "gather_next",
    "gather_roots",
    "reset_rows",
    "step_calls",
]
#: observations larger than this per env are written in place call by call instead
#: (recording them first would copy each one twice)
MAX_OBS_BYTES = 4096
#: the call-major buffers' size limit
MAX_RECORD_BYTES = 64 * 2**20


#: the pool layout :func:`direct_step` knows (one player per env, gym-style outputs)
_ACTION_KEYS = ["env_id", "players.env_id", "action"]
_STATE_KEYS = ("obs", "reward", "done", "trunc")

Step = Any  # (action, env_ids or None) -> (obs, reward, done, truncated)


def direct_step(pool: Any) -> Step:  # Any: an EnvPool pool
    """A step function for ``pool``: its C++ ``_send`` / ``_recv`` when the layout is known.

    EnvPool's ``step`` converts and checks the action, rebuilds its config dict and
    rebuilds the output tree on every call: about as much Python time as a
    CartPole step of 32 envs takes. For a pool of the plain layout (one player per
    env, one action array, an ``"obs"`` array) this calls the two C++ methods
    ``step`` is made of, with the action already in the pool's dtype, and reads
    the outputs by position. Any other layout keeps ``pool.step``.

    Examples:
        >>> import envpool
        >>> pool = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=2, seed=0)
        >>> _ = pool.reset()
        >>> obs, reward, done, truncated = direct_step(pool)(np.zeros(2, np.int32), None)
        >>> obs.shape, reward.shape, done.dtype
        ((2, 4), (2,), dtype('bool'))
    """

    def public(action: np.ndarray, ids: np.ndarray | None) -> tuple:
        obs, reward, terminated, truncated, _ = pool.step(action, ids)
        return obs, reward, terminated | truncated, truncated

    if action_dtype(pool) is None:  # the C++ step takes the action as it comes
        return public
    try:
        keys = list(pool._state_keys)
        known = (
            list(pool._action_keys) == _ACTION_KEYS
            and all(k in keys for k in _STATE_KEYS)
            and pool.config.get("max_num_players", 1) == 1
        )
        send, recv = pool._send, pool._recv
    except AttributeError:  # another EnvPool generation: its public step
        return public
    if not known:
        return public
    at_obs, at_reward, at_done, at_trunc = (keys.index(k) for k in _STATE_KEYS)
    every = np.arange(int(pool.config["num_envs"]), dtype=np.int32)

    def step(action: np.ndarray, ids: np.ndarray | None) -> tuple:
        ids = every if ids is None else ids
        send([ids, ids, action])
        state = recv()
        return state[at_obs], state[at_reward], state[at_done], state[at_trunc]

    return step


def action_dtype(pool: Any) -> np.dtype | None:  # Any: an EnvPool pool
    """The dtype ``pool`` takes its actions in (``None``: unknown)."""
    try:
        return np.dtype(pool.spec.action_array_spec["action"].dtype)
    except (AttributeError, KeyError, TypeError):
        return None


class CallRecord:
    """Call-major buffers, kept between batches (a fresh allocation is page-faulted in).

    Args:
        pool: the EnvPool pool the buffers record (its step function is built once).

    Examples:
        >>> import envpool
        >>> record = CallRecord(envpool.make("CartPole-v1", env_type="gymnasium", num_envs=2))
        >>> obs, reward, done, truncated = record.buffers(
        ...     8, 2, (4,), np.dtype(np.float32), np.dtype(np.float32)
        ... )
        >>> obs.shape, reward.shape, done.dtype
        ((9, 2, 4), (8, 2), dtype('bool'))
    """

    def __init__(self, pool: Any) -> None:  # Any: an EnvPool pool
        self._key: tuple | None = None
        #: the buffers :meth:`buffers` sized last
        self.current: tuple[np.ndarray, ...] = ()
        self.step = direct_step(pool)
        self.action_dtype = action_dtype(pool)

    @staticmethod
    def fits(calls: int, n: int, obs_shape: tuple, obs_dtype: np.dtype) -> bool:
        """Whether buffers for ``calls`` calls stay within the size limits."""
        per_env = int(np.prod(obs_shape, dtype=np.int64)) * obs_dtype.itemsize
        total = (calls + 1) * n * per_env + calls * n * 16
        return per_env <= MAX_OBS_BYTES and total <= MAX_RECORD_BYTES

    def buffers(
        self, calls: int, n: int, obs_shape: tuple, obs_dtype: np.dtype, reward_dtype: np.dtype
    ) -> tuple[np.ndarray, ...]:
        """``(obs [calls + 1, n, ...], reward, done, truncated [calls, n])``, now current."""
        key = (calls, n, tuple(obs_shape), obs_dtype, reward_dtype)
        if key != self._key:
            self.current = (
                np.empty((calls + 1, n, *obs_shape), obs_dtype),
                np.empty((calls, n), reward_dtype),
                np.empty((calls, n), bool),
                np.empty((calls, n), bool),
            )
            self._key = key
        return self.current


class Calls(NamedTuple):
    """What :func:`step_calls` recorded, besides the buffers."""

    #: ``[n]``: each env's calls
    count: np.ndarray
    #: ``[n]``: the envs left finished and not reset (without ``reset_last``)
    pending: np.ndarray
    #: ``[K, n]``: the calls that reset their env (the env's call before finished)
    resets: np.ndarray
    #: ``[K, n]``: the calls that made a transition
    keep: np.ndarray
    #: ``[n * T]``: the row of each transition in the flattened ``[K, n]`` buffers,
    #: env-major, in call order
    rows: np.ndarray
    #: the calls that stepped every env (the tail's calls follow)
    full: int


def step_calls(actions: np.ndarray, record: CallRecord, *, reset_last: bool) -> Calls:
    """Step a pool through a batch, recording each call into ``record``'s buffers.

    ``record.buffers`` must have been sized for ``2 * T`` calls and its observation
    row 0 hold the batch's first root (the one :func:`gather_roots` reads).

    Args:
        actions (np.ndarray): ``[n, T, ...]``, the pool's actions.
        record (CallRecord): the call-major buffers of a synchronous pool whose
            envs are all ready to step (no reset owed).

    Keyword Args:
        reset_last (bool): reset the envs that finish at their last step (one more
            call for those envs, whose observation is their next root).
    """
    rec_obs, rec_reward, rec_done, rec_tr = record.current
    n, steps = actions.shape[:2]
    calls = len(rec_reward)
    actions = np.ascontiguousarray(actions, dtype=record.action_dtype)
    actions = actions.reshape(n * steps, *actions.shape[2:])
    step = record.step
    start = np.arange(n, dtype=np.int64) * steps
    at = start.copy()  # each env's next action (row of ``actions``): start + transitions
    pending = np.zeros(n, dtype=bool)  # finished at its last call: the next one resets it
    # every env has work: one call steps them all; its outputs are kept as EnvPool
    # returns them (fresh arrays) and stacked once. An env's transitions grow by at
    # most one a call, so T - max(transitions) calls run before anything is checked
    obs_calls, reward_calls, done_calls, tr_calls = [], [], [], []
    while (room := steps - int((at - start).max())) > 0:
        for _ in range(room):
            obs, reward, done, truncated = step(actions.take(at, axis=0), None)
            obs_calls.append(obs)
            reward_calls.append(reward)
            done_calls.append(done)
            tr_calls.append(truncated)
            at += 1
            np.subtract(at, pending, out=at)  # a reset call makes no transition
            pending = done
    k = len(obs_calls)
    if k:
        np.stack(obs_calls, out=rec_obs[1 : k + 1], casting="unsafe")
        np.stack(reward_calls, out=rec_reward[:k], casting="unsafe")
        np.stack(done_calls, out=rec_done[:k])
        np.stack(tr_calls, out=rec_tr[:k])
    count = np.full(n, k, dtype=np.int64)
    end = start + steps
    while True:  # the tail: only the envs with work left, by env id
        need = at < end
        if reset_last:
            need |= pending
        ids = np.flatnonzero(need)
        if not len(ids):
            break
        c = count[ids]
        rows = np.minimum(at[ids], end[ids] - 1)  # a reset call's action is ignored
        # a sync pool answers in the order of the env ids sent
        obs, reward, done, truncated = step(actions.take(rows, axis=0), ids.astype(np.int32))
        rec_obs[c + 1, ids] = obs
        rec_reward[c, ids] = reward
        rec_done[c, ids] = done
        rec_tr[c, ids] = truncated
        at[ids] += ~pending[ids]
        pending[ids] = done
        count[ids] = c + 1
    # an env's calls fill its column in order; a call resets the env when the env's
    # call before it finished. The transitions: the other calls made
    made = np.arange(calls)[:, None] < count
    resets = np.zeros_like(made)
    np.logical_and(rec_done[:-1], made[1:], out=resets[1:])
    keep = made & ~resets
    env_of, call_of = np.nonzero(keep.T)  # env-major, in call order
    if len(call_of) != n * steps:
        raise RuntimeError(
            f"EnvPool's time-major fill expected {n * steps} transitions ({n} envs x {steps} "
            f"steps), recorded {len(call_of)}. This is a bug: please report it."
        )
    return Calls(count, pending, resets, keep, call_of * n + env_of, k)


def gather_next(record: CallRecord, calls: Calls, outputs: tuple[np.ndarray, ...]) -> None:
    """Write each transition's ``"next"`` entries into ``outputs`` (contiguous arrays).

    ``outputs``: observations ``[n, T, ...]``, reward, terminated, truncated and
    done ``[n, T]``, as the general path computes them (``terminated`` is
    EnvPool's done flag without truncation).
    """
    rec_obs, rec_reward, rec_done, rec_tr = record.current
    obs_out, reward_out, te_out, tr_out, done_out = outputs
    rows = calls.rows
    n = rec_obs.shape[1]
    flat_obs = rec_obs.reshape(-1, *rec_obs.shape[2:])
    np.take(flat_obs, rows + n, axis=0, out=obs_out.reshape(-1, *obs_out.shape[2:]))
    np.take(rec_reward.reshape(-1), rows, out=reward_out.reshape(-1))
    np.take(rec_tr.reshape(-1), rows, out=tr_out.reshape(-1))
    np.greater(rec_done.reshape(-1).take(rows).reshape(tr_out.shape), tr_out, out=te_out)
    np.logical_or(te_out, tr_out, out=done_out)


def gather_roots(record: CallRecord, calls: Calls, obs_out: np.ndarray) -> np.ndarray:
    """Write each transition's root observation into ``obs_out``; return the next roots.

    A transition's root is the output of its env's call before (a step or a reset
    call), or the first root. The next root of an env is its last call's output.
    """
    rec_obs = record.current[0]
    flat_obs = rec_obs.reshape(-1, *rec_obs.shape[2:])
    np.take(flat_obs, calls.rows, axis=0, out=obs_out.reshape(-1, *obs_out.shape[2:]))
    n = rec_obs.shape[1]
    return rec_obs[calls.count, np.arange(n)]


def reset_rows(record: CallRecord, calls: Calls) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The resets, as ``BufferedStepper.fill`` reports them: ``(steps, envs, observations)``.

    The step a reset follows is the env's transitions before that call, minus one.
    """
    call, env = np.nonzero(calls.resets)
    before = np.cumsum(calls.keep, axis=0)[call, env] - 1
    return before, env.astype(np.int64), record.current[0][call + 1, env]
