"""Transforms that drive the parent env: :class:`FrameSkipTransform`,
:class:`NoopResetEnv`, :class:`EndOfLifeTransform` and :class:`ConditionalSkip`.

They step or query the parent env (the base env and the transforms before them);
the parent is built once and cached until the chain changes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from tensordict import NestedKey, TensorDictBase

from rl_envs_core import step_mdp
from rl_specs import Categorical, Composite, Unbounded
from rl_transforms._base import Transform


def _parent_env(transform: Transform) -> Any:  # Any: the parent TransformedEnv
    parent = transform._lazy.get("parent")
    if parent is None:
        parent = transform.parent
        if parent is None:
            raise RuntimeError(
                f"{type(transform).__name__} drives its parent environment and needs one: use "
                f"it inside a TransformedEnv (env.append_transform({type(transform).__name__}(...)))."
            )
        transform._lazy["parent"] = parent
    return parent


def _any_done(tensordict: TensorDictBase, done_keys: list[NestedKey]) -> bool:
    for key in done_keys:
        value = tensordict.get(key, None)
        if value is not None and bool(value.any()):
            return True
    return False


def _keys_of(spec: Composite) -> list[NestedKey]:
    return list(spec.keys(True, True))


class FrameSkipTransform(Transform):
    """A frame-skip transform.

    Repeats each action ``frame_skip`` times in the parent env, summing the rewards
    and stopping early at the end of an episode.

    Args:
        frame_skip (int, optional): steps per action. Defaults to ``1``.

    Raises:
        ValueError: if ``frame_skip < 1``.

    Examples:
        >>> from rl_envs_core.testing import CountingEnv
        >>> from rl_transforms import TransformedEnv
        >>> env = TransformedEnv(CountingEnv(max_steps=10), FrameSkipTransform(3))
        >>> data = env.rollout(2)
        >>> data["next", "observation"].squeeze(-1), data["next", "reward"].squeeze(-1)
        (tensor([3., 6.]), tensor([3., 3.]))
    """

    def __init__(self, frame_skip: int = 1) -> None:
        if not isinstance(frame_skip, int) or frame_skip < 1:
            raise ValueError(f"FrameSkipTransform expected frame_skip >= 1, got {frame_skip!r}.")
        super().__init__()
        self.frame_skip = frame_skip

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        if self.frame_skip == 1:
            return next_tensordict
        parent = _parent_env(self)
        reward_keys = self._lazy.get("reward_keys", ["reward"])
        done_keys = self._lazy.get("done_keys", ["done"])
        totals = {key: next_tensordict.get(key) for key in reward_keys}
        for _ in range(self.frame_skip - 1):
            if _any_done(next_tensordict, done_keys):
                break
            next_tensordict = parent.step(tensordict.copy()).get("next")
            for key in reward_keys:
                totals[key] = totals[key] + next_tensordict.get(key)
        for key, total in totals.items():
            next_tensordict.set(key, total)
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError(
            "FrameSkipTransform repeats actions in an environment and cannot be applied to "
            "stored data. Use it in a TransformedEnv."
        )

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        self._lazy["reward_keys"] = _keys_of(output_spec["full_reward_spec"])
        self._lazy["done_keys"] = _keys_of(output_spec["full_done_spec"])
        return output_spec


class NoopResetEnv(Transform):
    """Runs a series of random actions when an environment is reset.

    Args:
        noops (int, optional): the (maximum) number of random steps. Defaults to ``30``.
        random (bool, optional): draw the number of steps uniformly in ``[1, noops]``.
            Defaults to ``True``.

    Raises:
        ValueError: if ``noops < 0``, or (at reset) the env is batched.
        RuntimeError: if the env keeps ending during the random steps.

    Examples:
        >>> from rl_envs_core.testing import CountingEnv
        >>> from rl_transforms import TransformedEnv
        >>> env = TransformedEnv(CountingEnv(max_steps=100), NoopResetEnv(noops=3, random=False))
        >>> env.reset()["observation"].item()
        3.0
    """

    _MAX_TRIALS = 10

    def __init__(self, noops: int = 30, random: bool = True) -> None:
        if noops < 0:
            raise ValueError(f"NoopResetEnv expected noops >= 0, got {noops}.")
        super().__init__()
        self.noops = noops
        self.random = random

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        if self.noops == 0:
            return tensordict_reset
        parent = _parent_env(self)
        if parent.batch_size:
            raise ValueError(
                f"The parent environment batch-size is non-null "
                f"({tuple(parent.batch_size)}): NoopResetEnv draws one number of random "
                f"steps for a single env. Append it to each sub-env instead (inside the "
                f"function given to SerialEnv/ParallelEnv)."
            )
        done_keys = parent.done_keys
        for _ in range(self._MAX_TRIALS):
            count = int(torch.randint(1, self.noops + 1, ())) if self.random else self.noops
            td = tensordict_reset
            for _ in range(count):
                td = parent.rand_step(td)
                td = step_mdp(td, exclude_action=True)
                if _any_done(td, done_keys):
                    break
            else:
                return td
            tensordict_reset = parent.reset()
        raise RuntimeError(
            f"NoopResetEnv: the env ended during the random steps {self._MAX_TRIALS} times in a "
            f"row (noops={self.noops}). Lower noops or use random=True."
        )


class EndOfLifeTransform(Transform):
    """Registers the end-of-life signal from a Gym env with a `lives` method.

    Writes ``eol_key`` (``True`` when a life was lost or the episode ended) and
    ``lives_key``. The lives come from the step output when it holds ``lives_key``,
    else from ``eol_attribute`` of the base env (e.g. ``unwrapped.ale.lives``).

    Args:
        eol_key (NestedKey, optional): the end-of-life flag. Defaults to ``"end-of-life"``.
        lives_key (NestedKey, optional): the number of lives. Defaults to ``"lives"``.
        done_key (NestedKey, optional): the done entry. Defaults to ``"done"``.
        eol_attribute (str, optional): dotted path of the lives method on the base env.
            Defaults to ``"unwrapped.ale.lives"``.

    Raises:
        AttributeError: if the lives can be found neither in the data nor on the env.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = EndOfLifeTransform()
        >>> prev = TensorDict({"lives": torch.tensor([3])})
        >>> nxt = TensorDict({"lives": torch.tensor([2]), "done": torch.tensor([False])})
        >>> t._step(prev, nxt)["end-of-life"]
        tensor([True])
    """

    def __init__(
        self,
        eol_key: NestedKey = "end-of-life",
        lives_key: NestedKey = "lives",
        done_key: NestedKey = "done",
        eol_attribute: str = "unwrapped.ale.lives",
    ) -> None:
        super().__init__()
        self._out_keys = [eol_key, lives_key]
        self.eol_key = eol_key
        self.lives_key = lives_key
        self.done_key = done_key
        self.eol_attribute = eol_attribute

    def _lives_from_env(self, like: torch.Tensor) -> torch.Tensor:
        obj = _parent_env(self).base_env
        obj = getattr(obj, "_env", obj)
        try:
            for name in self.eol_attribute.split("."):
                obj = getattr(obj, name)
        except AttributeError as err:
            raise AttributeError(
                f"EndOfLifeTransform found no {self.lives_key!r} entry and no attribute "
                f"{self.eol_attribute!r} on the base env. Return the lives from the env or pass "
                f"eol_attribute= naming its lives method."
            ) from err
        value = obj() if callable(obj) else obj
        return torch.as_tensor(value, device=like.device).expand(like.shape).clone()

    def _lives(self, tensordict: TensorDictBase, done: torch.Tensor) -> torch.Tensor:
        lives = tensordict.get(self.lives_key, None)
        return lives if lives is not None else self._lives_from_env(done)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        done = tensordict_reset.get(self.done_key)
        tensordict_reset.set(self.lives_key, self._lives(tensordict_reset, done))
        tensordict_reset.set(self.eol_key, torch.zeros_like(done))
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        done = next_tensordict.get(self.done_key)
        lives = self._lives(next_tensordict, done)
        previous = tensordict.get(self.lives_key, None)
        lost = (
            lives < previous.reshape(lives.shape)
            if previous is not None
            else torch.zeros_like(done)
        )
        next_tensordict.set(self.lives_key, lives)
        next_tensordict.set(self.eol_key, lost.reshape(done.shape) | done)
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError(
            "EndOfLifeTransform compares lives across env steps and cannot be applied to stored "
            "data. Use it in a TransformedEnv."
        )

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        return observation_spec

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        done = output_spec["full_done_spec"][self.done_key]
        obs = output_spec["full_observation_spec"]
        obs[self.eol_key] = Categorical(2, shape=done.shape, dtype=torch.bool, device=done.device)
        if obs.get(self.lives_key) is None:
            obs[self.lives_key] = Unbounded(shape=done.shape, dtype=torch.int64, device=done.device)
        return output_spec


class ConditionalSkip(Transform):
    """A transform that skips steps in the env if certain conditions are met.

    Before each step, ``cond(tensordict)`` is evaluated; where it is ``True`` the base
    env does not step and the previous values are returned. When every element skips,
    the transforms of the same :class:`TransformedEnv` do not run either (a step
    counter next to it does not count the skipped step); outer envs step as usual.

    Args:
        cond (callable): ``tensordict -> bool`` or a boolean tensor of the batch shape.

    Raises:
        TypeError: if ``cond`` is not callable.
        NotImplementedError: when called on data outside an env.

    Examples:
        >>> import torch
        >>> from rl_envs_core.testing import CountingEnv
        >>> from rl_transforms import TransformedEnv
        >>> env = TransformedEnv(CountingEnv(max_steps=10), ConditionalSkip(lambda td: td["observation"] >= 2))
        >>> env.rollout(4)["next", "observation"].squeeze(-1)
        tensor([1., 2., 2., 2.])
    """

    _skips_whole_steps = True

    def __init__(self, cond: Callable[[TensorDictBase], bool | torch.Tensor]) -> None:
        if not callable(cond):
            raise TypeError(f"ConditionalSkip expected a callable cond, got {type(cond).__name__}.")
        super().__init__()
        self.cond = cond

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        skip = torch.as_tensor(self.cond(tensordict), device=tensordict.device)
        skip = (
            skip.reshape(*tensordict.batch_size, -1).any(-1)
            if tensordict.batch_dims
            else skip.reshape(-1).any()
        )
        step = ~skip
        previous = tensordict.get("_step", None)
        if previous is not None:
            step = step & previous.reshape(step.shape)
        return tensordict.set("_step", step)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise NotImplementedError(
            "ConditionalSkip only acts inside an env (it marks the steps to skip before the "
            "base env steps); it cannot be called on data. Use it in a TransformedEnv."
        )

    def _has_inverse(self) -> bool:
        return True
