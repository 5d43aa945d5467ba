"""Partial resets of a synchronous EnvPool pool, sent as soon as a step finishes envs.

A rollout steps the pool, then resets the envs that finished. Each EnvPool call is
a round trip through its worker threads, and the reset one costs about as much as
the step. ``PoolResets`` sends the reset of the finished envs right after the step
(EnvPool's ``_reset`` does not wait) and receives it when the reset is asked for,
so the workers run it while Python does the rollout's bookkeeping.

Each env is still reset exactly once per finished episode, as if the reset were
made when asked: a reset asked for envs that were prefetched hands out the
prefetched observations, and a step taken without the reset starts those envs from
their reset state (what the wrapper did before, resetting them right before the
step). The only way to see the difference is to look at the env between the step
and the reset, which EnvPool allows through ``render``; pools built with a
``render_mode`` therefore reset when asked (``MultiThreadedEnvWrapper`` decides).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

__all__ = ["PoolResets", "keep_rows", "map_leaves", "recv_reset", "reset_now", "scatter_rows"]

# Any in this module: EnvPool pools and observations are library-defined.
Tree = Any  # a tensor or a (nested) dict of tensors, as the observation readers give


def map_leaves(fn: Callable[..., torch.Tensor], tree: Tree, *others: Tree) -> Tree:
    """Apply ``fn`` to the tensors of ``tree`` (and the matching ones of ``others``).

    Examples:
        >>> map_leaves(lambda a, b: a + b, {"x": torch.ones(1)}, {"x": torch.ones(1)})
        {'x': tensor([2.])}
    """
    if isinstance(tree, dict):
        return {k: map_leaves(fn, v, *(o[k] for o in others)) for k, v in tree.items()}
    return fn(tree, *others)


def scatter_rows(values: Tree, ids: np.ndarray, num_envs: int) -> Tree:
    """Rows of ``values`` placed at ``ids`` (increasing) of zero tensors with ``num_envs`` rows.

    Examples:
        >>> scatter_rows({"x": torch.tensor([1.0, 2.0])}, np.array([0, 2]), 3)
        {'x': tensor([1., 0., 2.])}
    """
    if len(ids) == num_envs:  # ids come from a mask: all of them, in order
        return values
    index = torch.from_numpy(ids.astype(np.int64, copy=False))

    def scatter(value: torch.Tensor) -> torch.Tensor:
        out = value.new_zeros((num_envs, *value.shape[1:]))
        out[index.to(value.device)] = value
        return out

    return map_leaves(scatter, values)


def recv_reset(pool: Any) -> Any:
    """Receive the observations of the reset sent last to ``pool``."""
    result = pool.recv(reset=True, return_info=True)
    return result[0] if isinstance(result, tuple) else result


def reset_now(pool: Any, ids: np.ndarray) -> Any:
    """Reset the envs ``ids`` of a synchronous pool; their observations, in ``ids`` order.

    The same calls as ``pool.reset(ids)`` without its keyword handling, which reads
    the pool's config dict (rebuilt on each access) twice per call.
    """
    pool._reset(ids)
    return recv_reset(pool)


class PoolResets:
    """The resets a synchronous pool owes after its steps, prefetched or made on demand.

    Args:
        pool: a synchronous EnvPool pool (``num_envs`` results per step).
        read_obs (callable): converts the pool's observations to (dicts of) tensors.
        num_envs (int): the pool's number of envs.
        prefetch (bool): send the reset of finished envs right after the step
            (``after_step``) instead of when it is asked for.

    Examples:
        >>> import envpool
        >>> pool = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=3, seed=0)
        >>> resets = PoolResets(pool, lambda obs: {"obs": torch.from_numpy(obs)}, 3, prefetch=True)
        >>> first = resets.reset(None)["obs"]  # every env
        >>> resets.after_step(np.array([False, True, False]))  # env 1 finished: reset sent
        >>> obs = resets.reset(np.array([False, True, True]))["obs"]
        >>> obs[0].abs().sum().item(), bool(obs[1:].abs().sum(-1).gt(0).all())
        (0.0, True)
    """

    def __init__(
        self, pool: Any, read_obs: Callable[[Any], Tree], num_envs: int, *, prefetch: bool
    ) -> None:
        self._pool = pool
        self._read_obs = read_obs
        self._num_envs = num_envs
        self._prefetch = prefetch
        self._all_ids = np.arange(num_envs, dtype=np.int32)
        self._owed: np.ndarray | None = None  # finished envs, reset not sent yet
        self._in_flight: np.ndarray | None = None  # reset sent, not received
        self._fresh: np.ndarray | None = None  # reset received, observations not handed out
        self._values: Tree = None  # those observations: num_envs rows, zeros elsewhere

    def after_step(self, done: np.ndarray) -> None:
        """Record the envs a step finished (``done``); send their reset when prefetching."""
        if not done.any():
            return
        if self._prefetch:
            self._pool._reset(self._all_ids[done])  # EnvPool's reset send; it does not wait
            self._in_flight = done
        else:
            self._owed = done

    def settle(self) -> None:
        """Wait for a sent reset, if any (before any other call to the pool)."""
        mask = self._in_flight
        if mask is None:
            return
        self._in_flight = None
        values = self._read_obs(recv_reset(self._pool))
        self._values = scatter_rows(values, self._all_ids[mask], self._num_envs)
        self._fresh = mask

    def before_step(self) -> None:
        """Reset the envs finished and not reset since; their observations are not seen."""
        self.settle()
        self._fresh = self._values = None
        owed, self._owed = self._owed, None
        if owed is not None:
            reset_now(self._pool, self._all_ids[owed])

    def forget(self) -> None:
        """Every env was reset some other way (``async_reset``): nothing is owed."""
        self.settle()
        self._owed = self._fresh = self._values = None

    def reset(self, requested: np.ndarray | None) -> Tree:
        """Reset the ``requested`` envs (``None``: all); observations with ``num_envs`` rows.

        Prefetched envs hand out their observations; the others are reset now. Rows
        of the envs not requested are zeros.
        """
        self.settle()
        if requested is None:
            requested = np.ones(self._num_envs, dtype=bool)
        if self._owed is not None:
            owed = self._owed & ~requested
            self._owed = owed if owed.any() else None
        fresh = self._fresh
        if fresh is None:
            return self._reset_rows(requested)
        used, rest, left = fresh & requested, requested & ~fresh, fresh & ~requested
        values = self._values
        if left.any():  # some prefetched envs keep their reset state for a later call
            self._fresh, self._values = left, keep_rows(values, left)
            values = keep_rows(values, used)
        else:
            self._fresh = self._values = None
        if rest.any():
            flags = torch.from_numpy(rest)
            values = map_leaves(
                lambda mine, now: torch.where(_row_mask(flags, now), now, mine),
                values,
                self._reset_rows(rest),
            )
        return values

    def _reset_rows(self, mask: np.ndarray) -> Tree:
        ids = self._all_ids[mask]
        return scatter_rows(self._read_obs(reset_now(self._pool, ids)), ids, self._num_envs)


def keep_rows(values: Tree, mask: np.ndarray) -> Tree:
    """``values`` with the rows where ``mask`` is ``False`` set to zero.

    Examples:
        >>> keep_rows({"x": torch.tensor([1.0, 2.0])}, np.array([False, True]))
        {'x': tensor([0., 2.])}
    """
    flags = torch.from_numpy(mask)

    def keep(value: torch.Tensor) -> torch.Tensor:
        zero = torch.zeros((), dtype=value.dtype, device=value.device)
        return torch.where(_row_mask(flags, value), value, zero)

    return map_leaves(keep, values)


def _row_mask(flags: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """One flag per row, shaped to broadcast over ``value``'s rows."""
    return flags.to(value.device).reshape(flags.shape + (1,) * (value.ndim - 1))
