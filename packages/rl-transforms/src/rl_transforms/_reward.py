"""Reward transforms: :class:`RewardClipping`, :class:`RewardScaling` and :class:`BinarizeReward`."""

from __future__ import annotations

import torch

from rl_specs import Binary, Bounded, TensorSpec, Unbounded
from rl_transforms._base import Transform
from rl_transforms._key_lists import KeyArg


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
                low=self.clamp_min, high=self.clamp_max, shape=spec.shape, dtype=spec.dtype,
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
