"""Rollouts written in place: a batch preallocated from the specs, filled step by step.

An env whose adapter can write its backend's outputs straight into tensors
implements one optional method, ``buffered_stepper(batch)`` (the
:class:`SupportsBufferedSteps` protocol). It gets a ``[*env.batch_size, T]``
tensordict whose actions are already written and returns a
:class:`BufferedStepper`, whose ``fill`` steps the backend ``T`` times, writing
step ``t``'s ``"next"`` entries into ``batch[..., t]`` and resetting finished envs
as it goes (in whatever order suits the backend: EnvPool's envs run ahead of one
another), and reports the resets it made. It may also return ``None`` to decline
(an option it does not handle): the caller then takes the general path
(``env.step`` per step).

:class:`BufferedRollout` is the engine behind the collectors' and ``rollout``'s
fast path. It allocates the batch (or takes a caller's), runs the stepper, and
builds the root entries afterwards with one copy per entry (the root of step
``t + 1`` is the ``"next"`` of step ``t``, except where an env was reset, whose
reset values are written over it). The result is the data the general path
gives for the same actions: same keys, values, dtypes and shapes (the ``"next"``
entries in the order of the specs: observations, reward, terminated, truncated,
done).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import torch
from tensordict import NestedKey, TensorDict, TensorDictBase

if TYPE_CHECKING:
    from rl_envs_core._env_base import EnvBase

__all__ = [
    "BufferedRollout",
    "BufferedStepper",
    "StepByStep",
    "SupportsBufferedSteps",
    "stepwise",
    "writes_rows",
]

_DONE_ORDER = {"terminated": 0, "truncated": 1, "done": 2}


#: what :meth:`BufferedStepper.fill` returns: the resets it made, or ``None``
Resets = tuple  # (steps: Tensor[k], envs: Tensor[k] | None, values: Mapping[key, Tensor[k, ...]])


@runtime_checkable
class BufferedStepper(Protocol):
    """Steps an env through one batch, writing each step into the batch's tensors.

    Returned by :meth:`SupportsBufferedSteps.buffered_stepper` for one batch.
    """

    def fill(self, reset_last: bool = True) -> Resets | None:
        """Step every env ``T`` times with the batch's actions; write each step.

        Step ``t`` of env ``e`` is written at ``[e, t]`` of the batch's ``"next"``
        entries (observations, rewards, done flags). An env that finishes is reset
        before its next step; after its last step only when ``reset_last``.

        Returns:
            ``None`` when no env was reset, else ``(steps, envs, values)``: for the
            ``k``-th reset, the time index of the step that finished the env
            (``steps[k]``, a long tensor), the env's flat index in the batch
            (``envs[k]``; ``envs`` is ``None`` for an unbatched env) and its first
            root values (``values[key][k]``, tensors or arrays). Done entries missing
            from ``values`` are ``False``.
        """
        ...


def writes_rows(stepper: Any) -> bool:  # Any: a BufferedStepper
    """Whether ``stepper`` can also write the root entries: a ``fill_rows`` method.

    ``fill_rows(carry, reset_last)`` does what ``fill`` does and also writes the
    root entries of every step (the observations and done flags the engine would
    build from the ``"next"`` entries and the resets; ``carry`` maps each of them to
    its value before the first step) and returns the next root's entries (a dict of
    ``[*batch, ...]`` tensors, the same keys). :meth:`BufferedRollout.run` prefers it:
    a backend that recorded its steps in its own layout builds both from one gather.
    """
    return callable(getattr(stepper, "fill_rows", None))


def stepwise(stepper: Any) -> bool:  # Any: a BufferedStepper
    """Whether ``stepper`` also has the per-step mode: a ``step(t)`` method.

    ``step(t)`` steps every env once with the actions written at ``[..., t]`` when it
    is called (a policy writes them just before), writes step ``t``'s ``"next"``
    entries and resets the envs that finished (always: the next root is needed).
    It returns the resets as :meth:`BufferedStepper.fill` does, every step index
    being ``t``. A stepper without it serves only batches whose actions are known
    in advance.
    """
    return callable(getattr(stepper, "step", None))


@runtime_checkable
class SupportsBufferedSteps(Protocol):
    """An env that can step straight into preallocated tensors (an optional method)."""

    def buffered_stepper(self, batch: TensorDictBase) -> BufferedStepper | None:
        """A stepper writing into ``batch`` (``[*batch_size, T]``), or ``None`` to decline.

        ``batch`` holds the action entries of the ``T`` steps and one preallocated
        tensor per ``"next"`` entry (observations, rewards, done flags).
        """
        ...


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
        cache = self._keys = env._key_cache()
        self.dim = len(env.batch_size)
        self.observation_leaves = list(cache["observation_leaves"])
        self.reward_leaves = list(cache["reward_leaves"])
        # the root lists the done flags as a reset gives them, "next" as a step does
        self.root_done_leaves = list(cache["done_leaves"])
        self.done_leaves = sorted(self.root_done_leaves, key=lambda kv: _DONE_ORDER[kv[0]])
        self.action_leaves = list(cache["action_leaves"])
        self.carried = [k for k, _ in self.observation_leaves] + [k for k, _ in self.done_leaves]

    @classmethod
    def cached(cls, env: EnvBase) -> BufferedRollout | None:
        """:meth:`of`, computed once per version of ``env``'s specs (kept on the env)."""
        keys = env._key_cache()  # a new dict whenever a spec is set: kept in it
        if "buffered_rollout" not in keys:
            keys["buffered_rollout"] = cls.of(env)
        return keys["buffered_rollout"]

    @property
    def current(self) -> bool:
        """Whether the env's specs are still those this engine was built for."""
        return self.env._key_cache() is self._keys

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
        if not all(_as_tuple(k) in keys for k in needed):
            return False
        # resets are written through flat views of the entries
        return all(out.get(k).is_contiguous() for k in needed)

    @property
    def reward_keys(self) -> list[NestedKey]:
        """The reward entry."""
        return [k for k, _ in self.reward_leaves]

    @property
    def action_keys(self) -> list[NestedKey]:
        """The action entries."""
        return [k for k, _ in self.action_leaves]

    # ------------------------------------------------------------------ run
    def _write_resets(
        self, batch: TensorDictBase, following: dict, resets: Resets, last: int
    ) -> None:
        """Write each reset's values over the root of the step after it (or the next root)."""
        steps, envs, values = resets
        steps = _as_index(steps)
        inside = steps < last
        rows = steps[inside] + 1
        n = max(1, self.env.batch_size.numel())
        if envs is not None:
            envs = _as_index(envs)
        for key in self.carried:
            root = batch.get(key)
            value = values.get(key)
            if value is None:
                value = torch.zeros((len(steps), *root.shape[self.dim + 1 :]), dtype=root.dtype)
            else:
                value = (
                    torch.as_tensor(value)
                    .to(root.dtype)
                    .reshape(len(steps), *root.shape[self.dim + 1 :])
                )
            nxt = following.get(key)  # only read for a reset after the last step
            if envs is None:
                root[rows] = value[inside]
                if not bool(inside.all()):
                    nxt.copy_(value[~inside][-1])
                continue
            flat = root.view(n, *root.shape[self.dim :])  # [n, T, ...]: a view of the batch
            flat[envs[inside], rows] = value[inside]
            if not bool(inside.all()):
                nxt.view(n, *nxt.shape[self.dim :])[envs[~inside]] = value[~inside]

    def _prepare(
        self, carry: TensorDictBase, batch: TensorDictBase
    ) -> tuple[Any, dict] | None:  # Any: the stepper
        """The env's stepper for ``batch`` and ``carry``'s carried values, or ``None``."""
        if not self.current:
            return None  # the specs changed: the caller builds a new engine
        carry_values = {}
        for key in self.carried:
            value = carry.get(key, None)
            if value is None:
                return None
            carry_values[key] = value
        skipped = set(self.reward_keys) | {"next", *(_as_tuple(k)[0] for k in self.action_keys)}
        if any(k not in carry_values and k not in skipped for k in carry.keys()):
            return None  # entries the steps would not carry on
        stepper = self.env.buffered_stepper(batch)
        if stepper is None:
            return None
        return stepper, carry_values

    def start(
        self,
        carry: TensorDictBase,
        batch: TensorDictBase,
        read: Sequence[str] | None = None,
    ) -> StepByStep | None:
        """Step ``batch`` one step at a time (a policy acts between steps), or ``None``.

        ``read`` lists the root entries the caller reads before each step (``None``:
        all); the others are written after the last step. ``None`` when :meth:`run`
        would decline or the env's stepper has no per-step mode (see
        :func:`stepwise`); nothing was stepped then.
        """
        prepared = self._prepare(carry, batch)
        if prepared is None or not stepwise(prepared[0]):
            return None
        return StepByStep(self, batch, *prepared, read=read)

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
        prepared = self._prepare(carry, batch)
        if prepared is None:
            return None
        stepper, carry_values = prepared
        if writes_rows(stepper):
            following = stepper.fill_rows(carry_values, reset_last)
            return TensorDict(following, batch_size=env.batch_size, device=carry.device)
        resets = stepper.fill(reset_last)
        dim, steps = self.dim, batch.batch_size[self.dim]
        last = steps - 1
        nxt = batch.get("next")
        following = {}
        for key in self.carried:
            root, after = batch.get(key), nxt.get(key)
            root.select(dim, 0).copy_(carry_values[key])
            if steps > 1:
                root.narrow(dim, 1, last).copy_(after.narrow(dim, 0, last))
            following[key] = after.select(dim, last).clone()
        if resets is not None:
            self._write_resets(batch, following, resets, last)
        return TensorDict(following, batch_size=env.batch_size, device=carry.device)


class StepByStep:
    """One batch stepped one step at a time: the root of ``t`` is written before step ``t``.

    Built by :meth:`BufferedRollout.start`. ``batch[..., t]``'s root entries hold
    step ``t``'s once the steps before ran: the first from the carry, the others
    from the previous step's ``"next"`` or the reset values.
    :meth:`step` steps once; after the last step :meth:`following` is the next root.
    """

    def __init__(
        self,
        engine: BufferedRollout,
        batch: TensorDictBase,
        stepper: Any,  # Any: a BufferedStepper with a step method
        carry: dict,
        read: Sequence[str] | None = None,
    ) -> None:
        dim = engine.dim
        self.engine, self.batch, self._step = engine, batch, stepper.step
        self.steps = batch.batch_size[dim]
        self.dim = dim
        nxt = batch.get("next")
        #: per carried key: the root and the "next" entry ([*batch, T, ...]); a step's
        #: views are taken when needed (T live views per entry would keep Python's
        #: garbage collector busy)
        pairs = {key: (batch.get(key), nxt.get(key)) for key in engine.carried}
        read = engine.carried if read is None else [k for k in engine.carried if k in read]
        #: the entries written before each step (those the caller reads); the others
        #: are written at the end, one copy per entry, and the resets over them
        self._now = [(key, *pairs[key]) for key in read]
        self._later = [(key, *pairs[key]) for key in engine.carried if key not in read]
        #: the same entries as numpy views ``[envs, T, ...]``: copying a step's row
        #: there costs a tenth of torch's select + copy_ (None: a dtype numpy lacks)
        self._now_rows = _row_arrays([(roots, nexts) for _, roots, nexts in self._now], dim)
        self._resets: list[tuple[int, Resets]] = []
        for key, roots, _ in self._now + self._later:
            roots.select(dim, 0).copy_(carry[key])
        self._following: dict = {}

    def step(self, t: int) -> None:
        """Step ``t`` (its actions written): its ``"next"``, then the root of ``t + 1``."""
        resets = self._step(t)
        last = self.steps - 1
        dim = self.dim
        if t < last:
            rows = self._now_rows
            if rows is not None:
                for roots, nexts in rows:
                    roots[:, t + 1] = nexts[:, t]
            else:
                for _, roots, nexts in self._now:
                    roots.select(dim, t + 1).copy_(nexts.select(dim, t))
        else:
            self._finish()
        if resets is not None:
            self._write_resets(t, resets, self._now)
            if t < last:
                self._resets.append((t, resets))
            else:
                self._write_resets(t, resets, self._later)

    def _finish(self) -> None:
        """After the last step: the next root, and the deferred entries of every step."""
        dim, last = self.dim, self.steps - 1
        self._following = {
            key: nexts.select(dim, last).clone() for key, _, nexts in self._now + self._later
        }
        if last:
            for _, roots, nexts in self._later:
                roots.narrow(dim, 1, last).copy_(nexts.narrow(dim, 0, last))
        for t, resets in self._resets:
            self._write_resets(t, resets, self._later)
        self._resets = []

    def _write_resets(self, t: int, resets: Resets, entries: list) -> None:
        """Write step ``t``'s resets over the root of ``t + 1`` (or the next root)."""
        _, envs, values = resets
        last = self.steps - 1
        for key, roots, _ in entries:
            target = roots.select(self.dim, t + 1) if t < last else self._following[key]
            value = values.get(key)
            if envs is None:  # an unbatched env: one reset
                if value is None:
                    target.zero_()
                else:
                    target.copy_(torch.as_tensor(value).reshape(target.shape))
                continue
            index = _as_index(envs)
            if value is None:
                target[index] = False if target.dtype == torch.bool else 0
            else:
                value = torch.as_tensor(value).to(target.dtype)
                target[index] = value.reshape(len(index), *target.shape[1:])

    def following(self, device: torch.device | None = None) -> TensorDictBase:
        """The root after the last step (the finished envs reset)."""
        return TensorDict(self._following, batch_size=self.engine.env.batch_size, device=device)


def _row_arrays(
    pairs: list[tuple[torch.Tensor, torch.Tensor]], dim: int
) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """``(root, next)`` entries ``[*batch, T, ...]`` as numpy views ``[envs, T, ...]``.

    ``None`` when one of them has no numpy view (a dtype numpy lacks, not contiguous).
    """
    out = []
    for root, nxt in pairs:
        if not (root.is_contiguous() and nxt.is_contiguous()):
            return None
        try:
            out.append((_flat_rows(root, dim), _flat_rows(nxt, dim)))
        except TypeError:  # bfloat16, float8: no numpy dtype
            return None
    return out


def _flat_rows(value: torch.Tensor, dim: int) -> np.ndarray:
    return value.reshape(-1, *value.shape[dim:]).numpy()


def _as_index(value: Any) -> torch.Tensor:  # Any: a tensor, an array or a list of ints
    if isinstance(value, np.ndarray):
        value = torch.from_numpy(value)
    return torch.as_tensor(value, dtype=torch.long)


def _as_tuple(key: NestedKey) -> tuple[str, ...]:
    return (key,) if isinstance(key, str) else tuple(key)


def _put(tree: dict, key: NestedKey, value: torch.Tensor) -> None:
    parts = _as_tuple(key)
    for part in parts[:-1]:
        tree = tree.setdefault(part, {})
    tree[parts[-1]] = value
