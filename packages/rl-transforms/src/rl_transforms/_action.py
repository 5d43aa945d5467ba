"""Action transforms: :class:`ActionMask`, :class:`ActionDiscretizer` and
:class:`DiscreteActionProjection`."""

from __future__ import annotations

import enum
from typing import Any

import torch
from tensordict import NestedKey, TensorDictBase

from rl_specs import (
    Bounded,
    Categorical,
    Composite,
    MultiCategorical,
    MultiOneHot,
    OneHot,
    TensorSpec,
)
from rl_transforms._base import Transform
from rl_transforms._key_lists import missing_key_error, spec_get


def root_env(transform: Transform) -> Any:  # Any: the TransformedEnv at the top of the chain
    """The environment holding ``transform`` (through any Compose), or ``None``."""
    node: Any = transform
    while isinstance(node, Transform):
        node = node.container
    return node


class ActionMask(Transform):
    """An adaptive action masker.

    Reads the mask returned by the env (at reset and after each step) and writes it
    into the transformed env's action spec, so that ``rand_action`` only draws
    allowed actions.

    Args:
        action_key (NestedKey, optional): the action. Defaults to ``"action"``.
        mask_key (NestedKey, optional): the mask. Defaults to ``"action_mask"``.

    Raises:
        ValueError: at reset or step, if the action spec cannot be masked (not a
            discrete spec).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rl_specs import Categorical
        >>> t = ActionMask()
        >>> out = t(TensorDict({"action_mask": torch.tensor([False, True, False])}))
        >>> out["action_mask"].tolist()
        [False, True, False]
    """

    def __init__(
        self, action_key: NestedKey = "action", mask_key: NestedKey = "action_mask"
    ) -> None:
        super().__init__()
        self._in_keys = [action_key, mask_key]
        self.action_key = action_key
        self.mask_key = mask_key

    def _action_spec(self) -> TensorSpec | None:
        spec = self._lazy.get("spec")
        if spec is None:
            env = root_env(self)
            if env is None:
                return None
            spec = self._lazy["spec"] = spec_get(env.full_action_spec, self.action_key)
        return spec

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        spec = self._action_spec()
        if spec is not None and not hasattr(spec, "update_mask"):
            raise ValueError(
                f"ActionMask cannot mask the action at {self.action_key!r}. The action spec "
                f"must be one of Categorical, OneHot, MultiCategorical, MultiOneHot or "
                f"Binary, got {type(spec).__name__}. Use ActionMask on discrete actions."
            )
        mask = next_tensordict.get(self.mask_key, None)
        if mask is None:
            if self._missing_tolerance:
                return next_tensordict
            raise missing_key_error("ActionMask", self.mask_key, next_tensordict, "mask_key")
        if spec is not None:
            spec.update_mask(mask.to(torch.bool))
        return next_tensordict

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        self._lazy.pop("spec", None)  # read again (and checked) at the next reset or step
        return input_spec


class ActionDiscretizer(Transform):
    """A transform to discretize a continuous action space.

    The base env keeps its bounded continuous action; the policy writes a discrete
    one (``out_action_key``) that the inverse maps to a value inside the matching
    interval.

    Args:
        num_intervals (int or torch.Tensor): intervals per action dim.
        action_key (NestedKey, optional): the base env's action. Defaults to ``"action"``.
        out_action_key (NestedKey, optional): the discrete action. Defaults to ``action_key``.
        sampling (ActionDiscretizer.SamplingStrategy, optional): which value of an
            interval is used. Defaults to ``SamplingStrategy.MEDIAN``.
        categorical (bool, optional): integer indices (``True``) or one-hot vectors.
            Defaults to ``True``.

    Raises:
        ValueError: if the base action spec is not :class:`Bounded`.

    Examples:
        >>> import torch
        >>> from rl_envs_core import PendulumEnv
        >>> from rl_transforms import TransformedEnv
        >>> env = TransformedEnv(PendulumEnv(), ActionDiscretizer(5, out_action_key="action_discrete"))
        >>> env.action_keys, env.full_action_spec["action_discrete"].n
        (['action_discrete'], 5)
        >>> td = env.reset().set("action_discrete", torch.tensor([4]))
        >>> env.transform.inv(td)["action"]  # the median of the last interval of [-2, 2]
        tensor([1.6000])
    """

    class SamplingStrategy(enum.IntEnum):
        """Which value of an interval a discrete action maps to."""

        MEDIAN = 0
        LOW = 1
        HIGH = 2
        RANDOM = 3

    def __init__(
        self,
        num_intervals: int | torch.Tensor,
        action_key: NestedKey = "action",
        out_action_key: NestedKey | None = None,
        sampling: SamplingStrategy | None = None,
        categorical: bool = True,
    ) -> None:
        out_action_key = out_action_key if out_action_key is not None else action_key
        super().__init__(in_keys_inv=[action_key], out_keys_inv=[out_action_key])
        self.num_intervals = num_intervals
        self.action_key = action_key
        self.out_action_key = out_action_key
        self.sampling = sampling if sampling is not None else self.SamplingStrategy.MEDIAN
        self.categorical = categorical
        self._bounds: tuple[torch.Tensor, torch.Tensor] | None = None

    def _nvec(self, event: torch.Size) -> list[int]:
        """Intervals per action element (one entry for a scalar action)."""
        counts = torch.as_tensor(self.num_intervals).reshape(-1)
        size = event.numel() if len(event) else 1
        if counts.numel() not in (1, size):
            raise ValueError(
                f"ActionDiscretizer expected num_intervals to be an int or to hold one count "
                f"per action element ({size}), got {counts.numel()} counts. Pass one count "
                f"per element or a single int."
            )
        return [int(n) for n in counts.expand(size)]

    def _inv_apply_transform(self, state: torch.Tensor) -> torch.Tensor:
        if self._bounds is None:
            raise RuntimeError(
                "ActionDiscretizer does not know the action bounds yet: attach it to an env "
                "with a Bounded action spec (TransformedEnv(env, ActionDiscretizer(...)))."
            )
        low, high = (b.to(state.device) for b in self._bounds)  # the unbatched action shape
        nvec = torch.tensor(self._nvec(low.shape), device=state.device, dtype=low.dtype)
        nvec = nvec.reshape(low.shape) if low.ndim else nvec.squeeze(0)
        if self.categorical:
            index = state
        elif low.ndim == 0:
            index = state.long().argmax(-1)
        else:
            chunks = state.split([int(n) for n in nvec.reshape(-1)], dim=-1)
            index = torch.stack([chunk.long().argmax(-1) for chunk in chunks], -1)
        index = index.to(low.dtype)
        width = (high - low) / nvec
        offset = {
            self.SamplingStrategy.MEDIAN: 0.5,
            self.SamplingStrategy.LOW: 0.0,
            self.SamplingStrategy.HIGH: 1.0,
        }.get(self.SamplingStrategy(self.sampling))
        if offset is None:
            offset = torch.rand_like(index)
        return torch.minimum(torch.maximum(low + (index + offset) * width, low), high)

    def _transform_inv_spec(self, spec: TensorSpec) -> TensorSpec:
        if not isinstance(spec, Bounded):
            raise ValueError(
                f"ActionDiscretizer expected a Bounded action spec at {self.action_key!r}, got "
                f"{type(spec).__name__}. Discretize continuous, bounded actions only."
            )
        env = root_env(self)
        batch = tuple(env.batch_size) if env is not None else ()
        if tuple(spec.shape[: len(batch)]) != batch:
            batch = ()
        lead = (0,) * len(batch)
        low, high = spec.low[lead].clone(), spec.high[lead].clone()
        self._bounds = (low, high)
        event = low.shape
        nvec = self._nvec(event)
        if self.categorical:
            if not event:
                return Categorical(nvec[0], shape=spec.shape, device=spec.device)
            if len(set(nvec)) == 1 and event.numel() == 1:
                return Categorical(nvec[0], shape=spec.shape, device=spec.device)
            return MultiCategorical(nvec, shape=spec.shape, device=spec.device)
        if not event or event.numel() == 1:
            return OneHot(nvec[0], shape=(*batch, *event[:-1], nvec[0]), device=spec.device)
        return MultiOneHot(nvec, shape=(*batch, *event[:-1], sum(nvec)), device=spec.device)

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        """Expose the discrete action; a renamed continuous action moves to the state spec.

        With ``out_action_key != action_key`` the policy only draws the discrete action,
        and the continuous value computed from it is recorded in the data as a state entry.
        """
        original = spec_get(input_spec["full_action_spec"], self.action_key)
        input_spec = super().transform_input_spec(input_spec)
        if original is not None and self.out_action_key != self.action_key:
            input_spec["full_action_spec"].pop(self.action_key, None)
            input_spec["full_state_spec"][self.action_key] = original.clone()
        return input_spec

    def __repr__(self) -> str:
        return (
            f"ActionDiscretizer(num_intervals={self.num_intervals}, action_key={self.action_key!r}, "
            f"out_action_key={self.out_action_key!r}, categorical={self.categorical})"
        )


class DiscreteActionProjection(Transform):
    """Projects discrete actions from a high dimensional space to a low dimensional space.

    A policy shared by envs with different numbers of actions picks among
    ``max_actions`` (one-hot); the base env takes ``num_actions_effective``. The
    inverse maps the policy's action to the env's, replacing an action
    ``>= num_actions_effective`` by a random allowed one; the forward
    (``include_forward``) maps the env's actions back to ``max_actions`` (for stored
    data).

    Args:
        num_actions_effective (int): the base env's number of actions.
        max_actions (int): the policy's number of actions.
        action_key (NestedKey, optional): the action. Defaults to ``"action"``.
        include_forward (bool, optional): also map actions in forward calls. Defaults to ``True``.

    Raises:
        ValueError: if ``num_actions_effective > max_actions``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = DiscreteActionProjection(2, 4)
        >>> t.inv(TensorDict({"action": torch.tensor([0, 1, 0, 0])}))["action"].tolist()
        [0, 1]
        >>> t(TensorDict({"action": torch.tensor([0, 1])}))["action"].tolist()
        [0, 1, 0, 0]
    """

    def __init__(
        self,
        num_actions_effective: int,
        max_actions: int,
        action_key: NestedKey = "action",
        include_forward: bool = True,
    ) -> None:
        if num_actions_effective > max_actions:
            raise ValueError(
                f"DiscreteActionProjection expected num_actions_effective <= max_actions, got "
                f"{num_actions_effective} > {max_actions}."
            )
        super().__init__(in_keys=[action_key] if include_forward else [], in_keys_inv=[action_key])
        self.num_actions_effective = num_actions_effective
        self.max_actions = max_actions
        self.action_key = action_key
        self.include_forward = include_forward

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        index = obs.long().argmax(-1)
        return torch.nn.functional.one_hot(index, self.max_actions).to(obs.dtype)

    def _inv_apply_transform(self, state: torch.Tensor) -> torch.Tensor:
        if state.shape[-1] != self.max_actions:
            raise ValueError(
                f"DiscreteActionProjection expected one-hot actions over max_actions="
                f"{self.max_actions} choices, got a last dim of {state.shape[-1]}. Write the "
                f"policy's action with the transformed env's action spec."
            )
        index = state.long().argmax(-1)
        random = torch.randint(self.num_actions_effective, index.shape, device=state.device)
        index = torch.where(index >= self.num_actions_effective, random, index)
        return torch.nn.functional.one_hot(index, self.num_actions_effective).to(state.dtype)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        return observation_spec

    def _transform_inv_spec(self, spec: TensorSpec) -> TensorSpec:
        return OneHot(
            self.max_actions,
            shape=(*spec.shape[:-1], self.max_actions),
            dtype=spec.dtype,
            device=spec.device,
        )
