"""Reward transforms: :class:`RewardClipping`, :class:`RewardScaling`, :class:`BinarizeReward`,
:class:`LineariseRewards` and :class:`Reward2GoTransform`."""

from __future__ import annotations

import torch
from tensordict import NestedKey, TensorDictBase

from rl_specs import Binary, Bounded, Composite, TensorSpec, Unbounded
from rl_transforms._base import Transform
from rl_transforms._key_lists import KeyArg, missing_key_error


def _reward_keys(in_keys: KeyArg) -> KeyArg:
    return in_keys if in_keys is not None else ["reward"]


class RewardClipping(Transform):
    """Clips the reward between `clamp_min` and `clamp_max`.

    Args:
        clamp_min (float, optional): lower bound. Defaults to ``None`` (unbounded).
        clamp_max (float, optional): upper bound. Defaults to ``None`` (unbounded).
        in_keys (sequence of NestedKey, optional): entries to clip. Defaults to ``["reward"]``.
        out_keys (sequence of NestedKey, optional): destination entries. Defaults to ``in_keys``.

    Raises:
        ValueError: if both bounds are ``None`` or ``clamp_min > clamp_max``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> clip = RewardClipping(clamp_min=-1.0, clamp_max=1.0)
        >>> clip(TensorDict({"reward": torch.tensor([3.0, -5.0])}))["reward"]
        tensor([ 1., -1.])
    """

    def __init__(
        self,
        clamp_min: float | None = None,
        clamp_max: float | None = None,
        in_keys: KeyArg = None,
        out_keys: KeyArg = None,
    ) -> None:
        if clamp_min is None and clamp_max is None:
            raise ValueError(
                "RewardClipping expected at least one of clamp_min and clamp_max, got neither. "
                "Pass e.g. clamp_min=-1.0, clamp_max=1.0."
            )
        if clamp_min is not None and clamp_max is not None and clamp_min > clamp_max:
            raise ValueError(
                f"RewardClipping expected clamp_min <= clamp_max, got clamp_min={clamp_min}, "
                f"clamp_max={clamp_max}. Swap the bounds or pass only one of them."
            )
        super().__init__(_reward_keys(in_keys), out_keys)
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        return obs.clamp(self.clamp_min, self.clamp_max)

    def _transform_spec(self, spec: TensorSpec) -> TensorSpec:
        if self.clamp_min is not None and self.clamp_max is not None:
            return Bounded(
                low=self.clamp_min,
                high=self.clamp_max,
                shape=spec.shape,
                dtype=spec.dtype,
                device=spec.device,
            )
        return spec.clone()


class RewardScaling(Transform):
    """Affine transform of the reward.

    The output is ``reward * scale + loc``, or ``(reward - loc) / scale`` with
    ``standard_normal=True``.

    Args:
        loc (float or torch.Tensor): the location.
        scale (float or torch.Tensor): the scale.
        in_keys (sequence of NestedKey, optional): entries to scale. Defaults to ``["reward"]``.
        out_keys (sequence of NestedKey, optional): destination entries. Defaults to ``in_keys``.
        standard_normal (bool, optional): see above. Defaults to ``False``.

    Raises:
        ValueError: if ``scale`` has a zero entry.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> RewardScaling(loc=1.0, scale=2.0)(TensorDict({"reward": torch.tensor([1.0])}))["reward"]
        tensor([3.])
    """

    def __init__(
        self,
        loc: float | torch.Tensor,
        scale: float | torch.Tensor,
        in_keys: KeyArg = None,
        out_keys: KeyArg = None,
        standard_normal: bool = False,
    ) -> None:
        super().__init__(_reward_keys(in_keys), out_keys)
        scale_t = torch.as_tensor(scale, dtype=torch.get_default_dtype())
        if bool((scale_t == 0).any()):
            raise ValueError(
                f"RewardScaling expected a non-zero scale, got scale={scale}. Pass e.g. scale=0.1."
            )
        self.register_buffer("loc", torch.as_tensor(loc, dtype=torch.get_default_dtype()).clone())
        self.register_buffer("scale", scale_t.clone())
        self.standard_normal = standard_normal

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        if self.standard_normal:
            return (obs - self.loc) / self.scale
        return obs * self.scale + self.loc

    def _transform_spec(self, spec: TensorSpec) -> TensorSpec:
        return Unbounded(shape=spec.shape, dtype=spec.dtype, device=spec.device)


class BinarizeReward(Transform):
    """Maps the reward to a binary value (0 or 1) if the reward is null or non-null, respectively.

    Positive rewards map to ``1``, the others to ``0`` (dtype ``int8``).

    Args:
        in_keys (sequence of NestedKey, optional): entries to binarize. Defaults to ``["reward"]``.
        out_keys (sequence of NestedKey, optional): destination entries. Defaults to ``in_keys``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> BinarizeReward()(TensorDict({"reward": torch.tensor([-1.0, 0.0, 2.0])}))["reward"]
        tensor([0, 0, 1], dtype=torch.int8)
    """

    def __init__(self, in_keys: KeyArg = None, out_keys: KeyArg = None) -> None:
        super().__init__(_reward_keys(in_keys), out_keys)

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        return (obs > 0).to(torch.int8)

    def _transform_spec(self, spec: TensorSpec) -> TensorSpec:
        n = spec.shape[-1] if len(spec.shape) else 1
        return Binary(n=n, shape=spec.shape, dtype=torch.int8, device=spec.device)


class LineariseRewards(Transform):
    """Transforms a multi-objective reward signal to a single-objective one via a weighted sum.

    Args:
        in_keys (sequence of NestedKey): the multi-objective rewards (objectives on the last dim).
        out_keys (sequence of NestedKey, optional): destination entries. Defaults to ``in_keys``.

    Keyword Args:
        weights (sequence of float or torch.Tensor, optional): one weight per objective.
            Defaults to ``None`` (all ones).

    Raises:
        ValueError: if ``weights`` is not one-dimensional.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = LineariseRewards(in_keys=["reward"], weights=[1.0, 2.0])
        >>> t(TensorDict({"reward": torch.tensor([[1.0, 1.0]])}, [1]))["reward"]
        tensor([[3.]])
    """

    def __init__(
        self,
        in_keys: KeyArg,
        out_keys: KeyArg = None,
        *,
        weights: list[float] | torch.Tensor | None = None,
    ) -> None:
        super().__init__(in_keys, out_keys)
        if weights is not None:
            weights = torch.as_tensor(weights, dtype=torch.get_default_dtype())
            if weights.ndim != 1:
                raise ValueError(
                    f"LineariseRewards expected one weight per objective (a 1-d sequence), got "
                    f"weights of shape {tuple(weights.shape)}."
                )
        self.register_buffer("weights", weights)

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        weights = self._buffers["weights"]
        if weights is None:
            return obs.sum(-1, keepdim=True)
        return (obs * weights.to(obs.dtype)).sum(-1, keepdim=True)

    def _transform_spec(self, spec: TensorSpec) -> TensorSpec:
        dtype = spec.dtype if spec.dtype.is_floating_point else torch.get_default_dtype()
        shape = (*spec.shape[:-1], 1)
        if isinstance(spec, Bounded):
            # the weighted sum of bounded objectives is bounded: a positive weight takes
            # an objective's low to the low end, a negative one its high
            low, high = spec.low.to(dtype), spec.high.to(dtype)
            weights = self._buffers["weights"]
            weights = torch.ones(low.shape[-1:], dtype=dtype) if weights is None else weights
            weights = weights.to(dtype=dtype, device=low.device)
            positive = weights >= 0
            new_low = torch.where(positive, weights * low, weights * high).sum(-1, keepdim=True)
            new_high = torch.where(positive, weights * high, weights * low).sum(-1, keepdim=True)
            return Bounded(low=new_low, high=new_high, shape=shape, dtype=dtype, device=spec.device)
        return Unbounded(shape=shape, dtype=dtype, device=spec.device)


class Reward2GoTransform(Transform):
    """Calculates the reward to go based on the episode reward and a discount factor.

    A replay-buffer transform: :meth:`inv` (applied when trajectories are written)
    computes ``rtg[t] = r[t] + gamma * rtg[t + 1]`` along the last batch dim, restarting
    after each done step. Forward calls leave the data unchanged.

    Args:
        gamma (float or torch.Tensor, optional): the discount. Defaults to ``1.0``.
        in_keys (sequence of NestedKey, optional): the rewards. Defaults to ``[("next", "reward")]``.
        out_keys (sequence of NestedKey, optional): the rewards to go. Defaults to ``["reward_to_go"]``.
        done_key (NestedKey, optional): the done entry, read under ``"next"``. Defaults to ``"done"``.

    Raises:
        RuntimeError: when attached to an environment.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = Reward2GoTransform(gamma=0.5)
        >>> traj = TensorDict({"next": {"reward": torch.ones(4, 1),
        ...                             "done": torch.tensor([[False], [True], [False], [False]])}}, [4])
        >>> t.inv(traj)["reward_to_go"].squeeze(-1)
        tensor([1.5000, 1.0000, 1.5000, 1.0000])
    """

    def __init__(
        self,
        gamma: float | torch.Tensor | None = 1.0,
        in_keys: KeyArg = None,
        out_keys: KeyArg = None,
        done_key: NestedKey | None = "done",
    ) -> None:
        super().__init__(
            in_keys if in_keys is not None else [("next", "reward")],
            out_keys if out_keys is not None else ["reward_to_go"],
        )
        self.register_buffer("gamma", torch.as_tensor(1.0 if gamma is None else gamma))
        self.done_key = done_key if done_key is not None else "done"

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        done = tensordict.get(("next", self.done_key), None)
        gamma = self._buffers["gamma"]
        for in_key, out_key in zip(self._in_keys, self._out_keys):
            reward = tensordict.get(in_key, None)
            if reward is None:
                raise missing_key_error("Reward2GoTransform", in_key, tensordict, "in_keys")
            # time runs along the reward's second-to-last dim (the last holds the reward's
            # own features), whatever the batch dims of the tensordict
            time_dim = max(reward.ndim - 2, 0)
            ends = done if done is not None else torch.zeros_like(reward, dtype=torch.bool)
            while ends.ndim < reward.ndim:
                ends = ends.unsqueeze(-1)
            out = torch.empty_like(reward)
            running = torch.zeros_like(reward.select(time_dim, 0))
            for t in range(reward.shape[time_dim] - 1, -1, -1):
                keep = (~ends.select(time_dim, t)).to(reward.dtype)
                running = reward.select(time_dim, t) + gamma.to(reward.dtype) * running * keep
                out.select(time_dim, t).copy_(running)
            tensordict.set(out_key, out)
        return tensordict

    def _has_inverse(self) -> bool:
        return True

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        raise RuntimeError(
            "Reward2GoTransform needs whole trajectories: use it as a replay-buffer transform "
            "(ReplayBuffer(transform=Reward2GoTransform(...))), not in an environment."
        )
