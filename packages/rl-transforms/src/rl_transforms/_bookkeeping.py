"""Episode bookkeeping: :class:`StepCounter`, :class:`RewardSum`, :class:`InitTracker`,
:class:`TargetReturn` (:class:`Timer` lives in ``_timer``).

Each transform works per done level (the root, or a nested group such as
``"agents"`` in multi-agent envs). The levels are read from the done spec when the
transform is attached to an environment, and default to the root otherwise.
"""

from __future__ import annotations

import torch
from tensordict import NestedKey, TensorDictBase

from rl_envs_core.extension import get_entry as read
from rl_envs_core.extension import set_entry as write
from rl_specs import Bounded, Categorical, Composite, Unbounded
from rl_transforms._base import Transform
from rl_transforms._episode_sums import done_next_to, episode_cumsum, time_dim
from rl_transforms._key_lists import KeyArg, key_list

Level = tuple[str, ...]

# Adding a 0-dim tensor skips wrapping the Python scalar 1 at every step (~0.4 µs);
# a 0-dim CPU tensor combines with tensors of any device and keeps their dtype.
_ONE = torch.ones((), dtype=torch.int64)


def _nest(level: Level, name: NestedKey) -> NestedKey:
    if not level:
        return name
    tail = (name,) if isinstance(name, str) else tuple(name)
    return (*level, *tail)


def _level_of(key: NestedKey) -> Level:
    return () if isinstance(key, str) else tuple(key[:-1])


def done_levels(done_spec: Composite) -> dict[Level, torch.Size]:
    """Done levels of ``done_spec`` and the shape of their done entries."""
    levels: dict[Level, torch.Size] = {}
    for key in done_spec.keys(True, True):
        levels.setdefault(_level_of(key), done_spec[key].shape)
    return levels


def _full_shape(tensordict: TensorDictBase, event: torch.Size | None) -> tuple[int, ...]:
    """The shape of an entry: the data's batch dims, then ``event`` (default ``(1,)``)."""
    return (*tensordict.batch_size, *(event if event is not None else (1,)))


def _event_shapes(levels: dict[Level, torch.Size], batch_ndim: int) -> dict[Level, torch.Size]:
    """Drop the env's batch dims from spec shapes (batch-unlocked envs get other batches)."""
    return {level: torch.Size(shape[batch_ndim:]) for level, shape in levels.items()}


def _zeros_at(
    tensordict: TensorDictBase, event: torch.Size | None, dtype: torch.dtype
) -> torch.Tensor:
    return torch.zeros(_full_shape(tensordict, event), dtype=dtype, device=tensordict.device)


class StepCounter(Transform):
    """Counts the steps from a reset and optionally sets the truncated state to True after a certain number of steps.

    Args:
        max_steps (int, optional): steps after which ``truncated`` (and ``done``) are set.
            Defaults to ``None`` (never).
        truncated_key (NestedKey, optional): the truncated entry. Defaults to ``"truncated"``.
        step_count_key (NestedKey, optional): the counter entry. Defaults to ``"step_count"``.
        update_done (bool, optional): also set ``done`` when truncating. Defaults to ``True``.

    Raises:
        ValueError: if ``max_steps`` is not a positive integer.

    Examples:
        >>> from rl_envs_core.testing import CountingEnv
        >>> from rl_transforms import TransformedEnv
        >>> env = TransformedEnv(CountingEnv(max_steps=100), StepCounter(max_steps=2))
        >>> data = env.rollout(10)
        >>> data["next", "step_count"].squeeze(-1), data["next", "truncated"].squeeze(-1)
        (tensor([1, 2]), tensor([False,  True]))
    """

    def __init__(
        self,
        max_steps: int | None = None,
        truncated_key: NestedKey | None = "truncated",
        step_count_key: NestedKey | None = "step_count",
        update_done: bool = True,
    ) -> None:
        if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
            raise ValueError(
                f"StepCounter expected max_steps to be a positive int or None, got "
                f"{max_steps!r}. Pass e.g. max_steps=1000."
            )
        super().__init__()
        self.max_steps = max_steps
        self.truncated_key = truncated_key if truncated_key is not None else "truncated"
        self.step_count_key = step_count_key if step_count_key is not None else "step_count"
        self.update_done = update_done

    def _levels(self) -> dict[Level, torch.Size | None]:
        return self._lazy.get("levels") or {(): None}

    def _plan(self) -> list[tuple[NestedKey, NestedKey, NestedKey]]:
        plan = self._lazy.get("plan")
        if plan is None:
            plan = self._lazy["plan"] = [
                (_nest(lv, self.step_count_key), _nest(lv, self.truncated_key), _nest(lv, "done"))
                for lv in self._levels()
            ]
        return plan

    @property
    def out_keys(self) -> list[NestedKey]:
        keys = [_nest(lv, self.step_count_key) for lv in self._levels()]
        if self.max_steps is not None:
            keys += [_nest(lv, self.truncated_key) for lv in self._levels()]
        return keys

    @out_keys.setter
    def out_keys(self, value: KeyArg) -> None:
        self._out_keys = key_list(value, owner="StepCounter", name="out_keys")

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        for (count_key, _, _), shape in zip(self._plan(), self._levels().values()):
            zeros = _zeros_at(tensordict_reset, shape, torch.int64)
            previous = tensordict.get(count_key, None)
            mask = tensordict.get(_nest(_level_of(count_key), "_reset"), None)
            if previous is not None and mask is not None and previous.shape == zeros.shape:
                zeros = torch.where(mask.reshape(previous.shape), zeros, previous)
            tensordict_reset.set(count_key, zeros)
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        max_steps = self.max_steps
        for count_key, truncated_key, done_key in self._plan():
            count = read(tensordict, count_key)
            if count is None:
                like = read(next_tensordict, done_key)
                shape = like.shape if like is not None else (*next_tensordict.batch_size, 1)
                count = torch.zeros(shape, dtype=torch.int64, device=next_tensordict.device)
            count = count + _ONE
            write(next_tensordict, count_key, count)
            if max_steps is not None:
                truncated = count >= max_steps
                previous = read(next_tensordict, truncated_key)
                if previous is not None:
                    truncated = truncated | previous
                write(next_tensordict, truncated_key, truncated)
                if self.update_done:
                    done = read(next_tensordict, done_key)
                    write(
                        next_tensordict, done_key, truncated if done is None else done | truncated
                    )
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError(
            "StepCounter counts steps of an environment and cannot be applied to stored data. "
            "Use it in a TransformedEnv (env.append_transform(StepCounter()))."
        )

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        done_spec = output_spec["full_done_spec"]
        levels = done_levels(done_spec) or {(): (*output_spec.shape, 1)}
        self._lazy.clear()
        self._lazy["levels"] = _event_shapes(levels, len(output_spec.shape))
        obs = output_spec["full_observation_spec"]
        bounded = self.max_steps is not None and self.update_done
        high = self.max_steps if bounded else torch.iinfo(torch.int64).max
        for level, shape in levels.items():
            obs[_nest(level, self.step_count_key)] = Bounded(
                low=0, high=high, shape=shape, dtype=torch.int64, device=obs.device
            )
            truncated_key = _nest(level, self.truncated_key)
            if self.max_steps is not None and done_spec.get(truncated_key) is None:
                done_spec[truncated_key] = Categorical(
                    2, shape=shape, dtype=torch.bool, device=done_spec.device
                )
        self._carry_as_state(obs, [_nest(level, self.step_count_key) for level in levels])
        return output_spec

    def __repr__(self) -> str:
        return f"StepCounter(max_steps={self.max_steps}, step_count_key={self.step_count_key!r})"


class RewardSum(Transform):
    """Tracks episode cumulative rewards.

    Args:
        in_keys (sequence of NestedKey, optional): the rewards to sum. Defaults to the
            env's reward keys (``["reward"]`` outside an env).
        out_keys (sequence of NestedKey, optional): the sums. Defaults to
            ``"episode_<name>"`` next to each reward (``"episode_reward"`` for ``"reward"``).
        reset_keys (sequence of NestedKey, optional): the ``"_reset"`` entry of each
            reward. Defaults to the one at each reward's level.

    Keyword Args:
        reward_spec (bool, optional): declare the sums in the reward spec instead of the
            observation spec. Defaults to ``False``.

    Outside an env (on stored trajectories, or in a replay buffer), the transform
    sums ``in_keys`` along the batch dim named ``"time"`` (the last batch dim when
    none is named), restarting after each done step.

    Raises:
        ValueError: if ``in_keys`` and ``out_keys`` differ in length, or (at reset)
            there is not one reset key per reward.

    Examples:
        >>> from rl_envs_core.testing import CountingEnv
        >>> from rl_transforms import TransformedEnv
        >>> env = TransformedEnv(CountingEnv(max_steps=3), RewardSum())
        >>> data = env.rollout(5)
        >>> data["next", "episode_reward"].squeeze(-1)
        tensor([1., 2., 3.])
        >>> offline = RewardSum(in_keys=[("next", "reward")], out_keys=[("next", "total")])
        >>> offline(data)["next", "total"].squeeze(-1)
        tensor([1., 2., 3.])
    """

    def __init__(
        self,
        in_keys: KeyArg = None,
        out_keys: KeyArg = None,
        reset_keys: KeyArg = None,
        *,
        reward_spec: bool = False,
    ) -> None:
        if in_keys is not None and out_keys is not None:
            n_in = len(key_list(in_keys, owner="RewardSum", name="in_keys"))
            n_out = len(key_list(out_keys, owner="RewardSum", name="out_keys"))
            if n_in != n_out:
                raise ValueError(
                    f"RewardSum expects the same number of input and output keys, got "
                    f"in_keys={in_keys} ({n_in}) and out_keys={out_keys} ({n_out}). Give one "
                    f"out_key per in_key, or leave out_keys unset."
                )
        super().__init__(in_keys=in_keys, out_keys=out_keys if in_keys is not None else None)
        self._explicit_in = in_keys is not None
        self._explicit_out = out_keys is not None
        if out_keys is not None and in_keys is None:
            self._out_keys = key_list(out_keys, owner="RewardSum", name="out_keys")
        self._explicit_reset = key_list(reset_keys, owner="RewardSum", name="reset_keys")
        self.reward_spec = reward_spec
        self._resolve(self._in_keys or ["reward"])

    def _resolve(self, reward_keys: list[NestedKey]) -> None:
        self._in_keys = list(reward_keys)
        if not self._explicit_out:
            self._out_keys = [
                _nest(_level_of(k), f"episode_{k if isinstance(k, str) else k[-1]}")
                for k in reward_keys
            ]
        if len(self._out_keys) != len(self._in_keys):
            raise ValueError(
                f"RewardSum expects the same number of input and output keys, got "
                f"in_keys={self._in_keys} and out_keys={self._out_keys}. Give matching "
                f"lists, or leave out_keys unset."
            )
        self.reset_keys = self._explicit_reset or [
            _nest(_level_of(k), "_reset") for k in self._in_keys
        ]

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        self._check_reset_keys()
        shapes = self._lazy.get("shapes", {})
        for _in_key, out_key, reset_key in zip(self._in_keys, self._out_keys, self.reset_keys):
            event, dtype = shapes.get(out_key, (None, torch.float32))
            zeros = _zeros_at(tensordict_reset, event, dtype)
            previous = tensordict.get(out_key, None)
            mask = tensordict.get(reset_key, None)
            if previous is not None and mask is not None and previous.shape == zeros.shape:
                zeros = torch.where(
                    mask.reshape(*mask.shape, *(1,) * (zeros.ndim - mask.ndim)), zeros, previous
                )
            tensordict_reset.set(out_key, zeros)
        return tensordict_reset

    def _check_reset_keys(self) -> None:
        if len(self.reset_keys) != len(self._in_keys):
            raise ValueError(
                f"Could not match the env reset_keys {self.reset_keys} with the in_keys "
                f"{self._in_keys}: RewardSum needs one reset key per reward. Pass one "
                f"reset_key per in_key (repeat '_reset' for rewards of the same level)."
            )

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in zip(self._in_keys, self._out_keys):
            reward = read(next_tensordict, in_key)
            if reward is None:
                if self._missing_tolerance:
                    continue
                raise KeyError(
                    f"RewardSum expected the reward {in_key!r} in the step output, got entries "
                    f"{sorted(map(str, next_tensordict.keys(True, True)))}. Pass "
                    f"in_keys=<your reward keys> to RewardSum."
                )
            previous = read(tensordict, out_key)
            write(next_tensordict, out_key, reward if previous is None else previous + reward)
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Sum the rewards of stored trajectories along their ``"time"`` dim, per episode.

        The sum restarts after each step whose ``"done"`` (next to the reward) is set.

        Raises:
            ValueError: if the data has no batch dim.
            KeyError: if a reward entry is missing.
        """
        dim = time_dim(tensordict, "RewardSum")
        for in_key, out_key in zip(self._in_keys, self._out_keys):
            reward = tensordict.get(in_key, None)
            if reward is None:
                raise KeyError(
                    f"RewardSum expected the reward {in_key!r} in the data, got entries "
                    f"{sorted(map(str, tensordict.keys(True, True)))}. Stored transitions keep "
                    f"rewards under 'next': pass in_keys=[('next', 'reward')]."
                )
            done = tensordict.get(done_next_to(in_key), None)
            tensordict.set(out_key, episode_cumsum(reward, done, dim))
        return tensordict

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        reward_spec = output_spec["full_reward_spec"]
        if not self._explicit_in:
            keys = list(reward_spec.keys(True, True))
            self._resolve(keys or ["reward"])
        target = reward_spec if self.reward_spec else output_spec["full_observation_spec"]
        shapes = {}
        for in_key, out_key in zip(self._in_keys, self._out_keys):
            leaf = reward_spec.get(in_key)
            if leaf is None:
                raise KeyError(
                    f"RewardSum expected the reward {in_key!r} in the env's reward spec, which "
                    f"holds {sorted(map(str, reward_spec.keys(True, True)))}. Fix in_keys."
                )
            target[out_key] = Unbounded(shape=leaf.shape, dtype=leaf.dtype, device=leaf.device)
            shapes[out_key] = (leaf.shape[len(output_spec.shape) :], leaf.dtype)
        self._lazy["shapes"] = shapes
        self._carry_as_state(target, self._out_keys)
        return output_spec

    def __repr__(self) -> str:
        return f"RewardSum(in_keys={self.in_keys}, out_keys={self.out_keys})"


class InitTracker(Transform):
    """Reset tracker.

    Writes a boolean ``init_key`` that is ``True`` on the data returned by a reset and
    ``False`` after each step.

    Args:
        init_key (str, optional): the flag's name, written next to every done entry.
            Defaults to ``"is_init"``.

    Raises:
        ValueError: if ``init_key`` is not a string.
        NotImplementedError: when called outside an env (``forward``).

    Examples:
        >>> from rl_envs_core.testing import CountingEnv
        >>> from rl_transforms import TransformedEnv
        >>> env = TransformedEnv(CountingEnv(max_steps=2), InitTracker())
        >>> env.rollout(3)["is_init"].squeeze(-1)
        tensor([ True, False])
    """

    def __init__(self, init_key: str = "is_init") -> None:
        if not isinstance(init_key, str):
            raise ValueError(
                f"InitTracker expected init_key to be a str, got {init_key!r}: init_key can only "
                f"be of type str (the flag is written next to every done entry, nested ones "
                f"included). Pass e.g. init_key='is_init'."
            )
        super().__init__()
        self.init_key = init_key

    def _keys(self) -> list[tuple[NestedKey, torch.Size | None]]:
        levels = self._lazy.get("levels") or {(): None}
        return [(_nest(level, self.init_key), shape) for level, shape in levels.items()]

    @property
    def out_keys(self) -> list[NestedKey]:
        return [key for key, _ in self._keys()]

    @out_keys.setter
    def out_keys(self, value: KeyArg) -> None:
        self._out_keys = key_list(value, owner="InitTracker", name="out_keys")

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        for key, shape in self._keys():
            flag = torch.ones(
                _full_shape(tensordict_reset, shape),
                dtype=torch.bool,
                device=tensordict_reset.device,
            )
            tensordict_reset.set(key, flag)
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        for key, shape in self._keys():
            next_tensordict.set(
                key,
                torch.zeros(
                    _full_shape(next_tensordict, shape),
                    dtype=torch.bool,
                    device=next_tensordict.device,
                ),
            )
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise NotImplementedError(
            "InitTracker marks the first step after a reset: InitTracker cannot be executed "
            "without a parent env (stored data or a plain module call). Use it in a "
            "TransformedEnv (env.append_transform(InitTracker()))."
        )

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        levels = done_levels(output_spec["full_done_spec"]) or {(): (*output_spec.shape, 1)}
        self._lazy["levels"] = _event_shapes(levels, len(output_spec.shape))
        obs = output_spec["full_observation_spec"]
        for level, shape in levels.items():
            obs[_nest(level, self.init_key)] = Categorical(
                2, shape=shape, dtype=torch.bool, device=obs.device
            )
        return output_spec


class TargetReturn(Transform):
    """Sets a target return for the agent to achieve in the environment.

    At reset the target is ``target_return``; after each step it is reduced by the
    reward (``mode="reduce"``) or kept (``mode="constant"``).

    Args:
        target_return (float): the return to achieve.
        mode (str, optional): ``"reduce"`` or ``"constant"``. Defaults to ``"reduce"``.
        in_keys (sequence of NestedKey, optional): the rewards. Defaults to the env's
            reward keys (``["reward"]`` outside an env).
        out_keys (sequence of NestedKey, optional): the targets. Defaults to
            ``"target_return"`` next to each reward.
        reset_key (NestedKey, optional): the reset entry. Defaults to ``"_reset"``.

    Raises:
        ValueError: if ``mode`` is unknown.

    Examples:
        >>> from rl_envs_core.testing import CountingEnv
        >>> from rl_transforms import TransformedEnv
        >>> env = TransformedEnv(CountingEnv(max_steps=5), TargetReturn(10.0))
        >>> env.rollout(3)["next", "target_return"].squeeze(-1)
        tensor([9., 8., 7.])
    """

    MODES = ("reduce", "constant")

    def __init__(
        self,
        target_return: float,
        mode: str = "reduce",
        in_keys: KeyArg = None,
        out_keys: KeyArg = None,
        reset_key: NestedKey | None = None,
    ) -> None:
        if mode not in self.MODES:
            raise ValueError(f"TargetReturn expected mode in {self.MODES}, got {mode!r}.")
        keys = key_list(in_keys, owner="TargetReturn", name="in_keys") or ["reward"]
        outs = (
            key_list(out_keys, owner="TargetReturn", name="out_keys")
            if out_keys is not None
            else [_nest(_level_of(k), "target_return") for k in keys]
        )
        super().__init__(keys, outs)
        self._explicit_in = in_keys is not None
        self._explicit_out = out_keys is not None
        self.target_return = float(target_return)
        self.mode = mode
        self.reset_key = reset_key if reset_key is not None else "_reset"

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        shapes = self._lazy.get("shapes", {})
        for out_key in self._out_keys:
            event, dtype = shapes.get(out_key, (None, torch.float32))
            tensordict_reset.set(
                out_key,
                torch.full(
                    _full_shape(tensordict_reset, event),
                    self.target_return,
                    dtype=dtype,
                    device=tensordict_reset.device,
                ),
            )
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in zip(self._in_keys, self._out_keys):
            target = tensordict.get(out_key, None)
            if target is None:
                raise KeyError(
                    f"TargetReturn expected {out_key!r} in the step input (written at reset). "
                    f"Reset the env first and keep {out_key!r} in the data."
                )
            if self.mode == "reduce":
                target = target - next_tensordict.get(in_key)
            next_tensordict.set(out_key, target)
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError(
            "TargetReturn tracks a return along an episode and cannot be applied to stored data. "
            "Use it in a TransformedEnv."
        )

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        reward_spec = output_spec["full_reward_spec"]
        if not self._explicit_in:
            self._in_keys = list(reward_spec.keys(True, True)) or ["reward"]
            if not self._explicit_out:
                self._out_keys = [_nest(_level_of(k), "target_return") for k in self._in_keys]
        obs = output_spec["full_observation_spec"]
        shapes = {}
        for in_key, out_key in zip(self._in_keys, self._out_keys):
            leaf = reward_spec[in_key]
            obs[out_key] = Unbounded(shape=leaf.shape, dtype=leaf.dtype, device=leaf.device)
            shapes[out_key] = (leaf.shape[len(output_spec.shape) :], leaf.dtype)
        self._lazy["shapes"] = shapes
        self._carry_as_state(obs, self._out_keys)
        return output_spec
