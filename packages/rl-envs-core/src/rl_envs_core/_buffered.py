"""Rollouts written in place: a batch preallocated from the specs, filled step by step.

An env whose adapter can write its backend's outputs straight into tensors
implements one optional method, ``buffered_stepper(batch)`` (the
:class:`SupportsBufferedSteps` protocol). It gets a ``[*env.batch_size, T]``
tensordict whose actions are already written and returns a
:class:`BufferedStepper` that steps the backend for time index ``t``, writing the
``"next"`` entries of that step into ``batch[..., t]``, and resets the envs the
last step finished. It may also return ``None`` to decline (an option it does not
handle): the caller then takes the general path (``env.step`` per step).

:class:`BufferedRollout` is the engine behind the collectors' and ``rollout``'s
fast path. It allocates the batch (or takes a caller's), runs the stepper, and
builds the root entries afterwards with one copy per entry (the root of step
``t + 1`` is the ``"next"`` of step ``t``, except where an env was reset, whose
reset values are written over it). The result is the data the general path
gives for the same actions: same keys, values, dtypes and shapes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import torch
from tensordict import NestedKey, TensorDict, TensorDictBase

if TYPE_CHECKING:
    from rl_envs_core._env_base import EnvBase

__all__ = ["BufferedRollout", "BufferedStepper", "SupportsBufferedSteps"]

_DONE_ORDER = {"terminated": 0, "truncated": 1, "done": 2}


@runtime_checkable
class BufferedStepper(Protocol):
    """Steps an env for one batch, writing each step into the batch's tensors.

    Returned by :meth:`SupportsBufferedSteps.buffered_stepper` for one batch.
    """

    def step(self, t: int) -> bool:
        """Step every env with the actions at time ``t`` of the batch.

        Writes the step's observations, rewards and done flags at time ``t`` of the
        batch's ``"next"`` entries. Returns whether some env finished.
        """
        ...

    def reset(self) -> tuple[Any, Mapping[NestedKey, Any]]:  # Any: bool masks, arrays or tensors
        """Reset the envs the last step finished; return ``(mask, values)``.

        ``mask`` is a ``[*env.batch_size]`` bool array or tensor (``None`` for an
        unbatched env); ``values`` maps root keys to the reset values, numpy arrays or
        tensors with every env's row (only the masked rows are read). Done entries
        missing from ``values`` are ``False``.
        """
        ...


@runtime_checkable
class SupportsBufferedSteps(Protocol):
    """An env that can step straight into preallocated tensors (an optional method)."""

    def buffered_stepper(self, batch: TensorDictBase) -> BufferedStepper | None:
        """A stepper writing into ``batch`` (``[*batch_size, T]``), or ``None`` to decline.

        ``batch`` holds the action entries of the ``T`` steps and one preallocated
        tensor per ``"next"`` entry (observations, rewards, done flags).
        """
        ...


def _is_next(key: NestedKey) -> bool:
    return isinstance(key, tuple) and key[0] == "next"


class BufferedRollout:
    """Fills ``[*batch, T]`` batches of an env's steps in place, through its stepper.

    Build it with :meth:`of`, which returns ``None`` when the env has no
    ``buffered_stepper`` method or a layout the engine does not handle (nested or
    missing done entries, several rewards, dynamic shapes, a device other than the
    cpu). :meth:`run` returns ``None`` when the env's stepper declines.

    Args:
        env (EnvBase): the env.

    Examples:
        >>> from rl_envs_core.testing import CountingEnv
        >>> BufferedRollout.of(CountingEnv()) is None  # no buffered_stepper method
        True
    """

    def __init__(self, env: EnvBase) -> None:
        self.env = env
        cache = env._key_cache()
        self.dim = len(env.batch_size)
        self.observation_leaves = list(cache["observation_leaves"])
        self.reward_leaves = list(cache["reward_leaves"])
        # the root lists the done flags as a reset gives them, "next" as a step does
        self.root_done_leaves = list(cache["done_leaves"])
        self.done_leaves = sorted(self.root_done_leaves, key=lambda kv: _DONE_ORDER[kv[0]])
        self.action_leaves = list(cache["action_leaves"])
        self.carried = [k for k, _ in self.observation_leaves] + [k for k, _ in self.done_leaves]

    @classmethod
    def of(cls, env: EnvBase) -> BufferedRollout | None:
        """The engine for ``env``, or ``None`` when ``env`` cannot take the fast path."""
        if not callable(getattr(type(env), "buffered_stepper", None)):
            return None
        if env.device is not None and env.device.type != "cpu":
            return None
        cache = env._key_cache()
        if cache["dynamic"] or len(cache["reward_keys"]) != 1 or cache["state_keys"]:
            return None
        done = cache["done_keys"]
        if "done" not in done or not all(k in _DONE_ORDER for k in done):
            return None
        if not all(isinstance(k, str) for k, _ in cache["observation_leaves"]):
            return None
        return cls(env)

    # ------------------------------------------------------------------ layout
    def allocate(self, steps: int) -> TensorDictBase:
        """An empty ``[*batch, steps]`` batch: root, ``"next"`` and action entries."""
        batch = self.env.batch_size
        tree: dict[str, Any] = {}  # Any: tensors and the "next" sub-dict
        nxt: dict[str, torch.Tensor] = {}

        def empty(leaf: Any) -> torch.Tensor:  # Any: a TensorSpec
            shape = (*batch, steps, *leaf.shape[self.dim :])
            return torch.empty(shape, dtype=leaf.dtype)

        for key, leaf in self.observation_leaves:
            tree[key] = empty(leaf)
        for key, leaf in self.root_done_leaves:
            tree[key] = empty(leaf)
        for key, leaf in self.action_leaves:
            _put(tree, key, empty(leaf))
        for key, leaf in self.observation_leaves + self.reward_leaves + self.done_leaves:
            _put(nxt, key, empty(leaf))
        tree["next"] = nxt
        out = TensorDict(tree, batch_size=[*batch, steps])
        out.names = [None] * self.dim + ["time"]
        return out

    def fits(self, out: TensorDictBase, steps: int) -> bool:
        """Whether ``out`` (a caller's batch) has every entry this engine writes."""
        if tuple(out.batch_size) != (*self.env.batch_size, steps):
            return False
        keys = {_as_tuple(k) for k in out.keys(True, True)}
        needed = [*self.carried, *(k for k, _ in self.action_leaves)]
        needed += [("next", *_as_tuple(k)) for k in [*self.carried, *self.reward_keys]]
        return all(_as_tuple(k) in keys for k in needed)

    @property
    def reward_keys(self) -> list[NestedKey]:
        """The reward entry."""
        return [k for k, _ in self.reward_leaves]

    @property
    def action_keys(self) -> list[NestedKey]:
        """The action entries."""
        return [k for k, _ in self.action_leaves]

    # ------------------------------------------------------------------ run
    def run(
        self,
        carry: TensorDictBase,
        batch: TensorDictBase,
        *,
        reset_last: bool = True,
    ) -> TensorDictBase | None:
        """Run ``batch``'s steps from ``carry``; return the root of the next step.

        Args:
            carry (TensorDictBase): the root before the first step (its observations
                and done flags are read).
            batch (TensorDictBase): from :meth:`allocate` (or a caller's batch with
                the same entries), its actions written.

        Keyword Args:
            reset_last (bool, optional): reset the envs the last step finished and
                return the next root. ``False`` leaves them as they are (``rollout``
                does not reset after its last step) and returns the last ``"next"``.
                Defaults to ``True``.

        Returns:
            the next root (a new tensordict), or ``None`` if the env declined (nothing
            was stepped).
        """
        env = self.env
        if not env._io_checked or env.run_type_checks:
            return None  # the first step of an env goes through its checks
        carry_values = {}
        for key in self.carried:
            value = carry.get(key, None)
            if value is None:
                return None
            carry_values[key] = value
        skipped = set(self.reward_keys) | {"next", *(_as_tuple(k)[0] for k in self.action_keys)}
        if any(k not in carry_values and k not in skipped for k in carry.keys()):
            return None  # entries the steps would not carry on
        stepper = env.buffered_stepper(batch)
        if stepper is None:
            return None
        steps = batch.batch_size[self.dim]
        dim = self.dim
        step, reset = stepper.step, stepper.reset
        resets = []
        last = steps - 1
        for t in range(steps):
            if step(t) and (reset_last or t < last):
                resets.append((t, *reset()))
        nxt = batch.get("next")
        following = {}
        for key in self.carried:
            root, after = batch.get(key), nxt.get(key)
            root.select(dim, 0).copy_(carry_values[key])
            if steps > 1:
                root.narrow(dim, 1, last).copy_(after.narrow(dim, 0, last))
            following[key] = after.select(dim, last).clone()
        for t, mask, values in resets:
            for key in self.carried:
                dest = following[key] if t == last else batch.get(key).select(dim, t + 1)
                _write_reset(dest, mask, values.get(key))
        return TensorDict(following, batch_size=env.batch_size, device=carry.device)


def _write_reset(dest: torch.Tensor, mask: Any, value: Any) -> None:  # Any: see reset()
    if value is None:
        value = torch.zeros((), dtype=dest.dtype)
    else:
        value = torch.as_tensor(value, dtype=dest.dtype)
    if mask is None:
        dest.copy_(value.reshape(dest.shape) if value.numel() == dest.numel() else value)
        return
    if isinstance(mask, np.ndarray):
        mask = torch.from_numpy(mask)
    if value.ndim == 0:
        dest[mask] = value
    else:
        dest[mask] = value[mask].reshape(dest[mask].shape)


def _as_tuple(key: NestedKey) -> tuple[str, ...]:
    return (key,) if isinstance(key, str) else tuple(key)


def _put(tree: dict, key: NestedKey, value: torch.Tensor) -> None:
    parts = _as_tuple(key)
    for part in parts[:-1]:
        tree = tree.setdefault(part, {})
    tree[parts[-1]] = value
