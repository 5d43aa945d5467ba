"""Element-wise value transforms: :class:`SignTransform`, :class:`ClipTransform`,
:class:`UnaryTransform` and :class:`FiniteTensorDictCheck`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_specs import Bounded, TensorSpec, Unbounded
from rl_transforms._base import Transform
from rl_transforms._key_lists import KeyArg


class SignTransform(Transform):
    """A transform to compute the signs of TensorDict values.

    Args:
        in_keys (sequence of NestedKey, optional): entries. Defaults to ``[]``.
        out_keys (sequence of NestedKey, optional): destination entries. Defaults to ``in_keys``.
        in_keys_inv (sequence of NestedKey, optional): base-side inverse entries. Defaults to ``[]``.
        out_keys_inv (sequence of NestedKey, optional): policy-side inverse entries.
            Defaults to ``in_keys_inv``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> SignTransform(in_keys=["r"])(TensorDict({"r": torch.tensor([-2.0, 0.0, 3.0])}))["r"]
        tensor([-1.,  0.,  1.])
    """

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        return obs.sign()

    def _inv_apply_transform(self, state: torch.Tensor) -> torch.Tensor:
        return state.sign()

    def _transform_spec(self, spec: TensorSpec) -> TensorSpec:
        return Bounded(low=-1, high=1, shape=spec.shape, dtype=spec.dtype, device=spec.device)


class ClipTransform(Transform):
    """A transform to clip input (state, action) or output (observation, reward) values.

    Args:
        in_keys (sequence of NestedKey, optional): entries. Defaults to ``[]``.
        out_keys (sequence of NestedKey, optional): destination entries. Defaults to ``in_keys``.
        in_keys_inv (sequence of NestedKey, optional): base-side inverse entries. Defaults to ``[]``.
        out_keys_inv (sequence of NestedKey, optional): policy-side inverse entries.
            Defaults to ``in_keys_inv``.

    Keyword Args:
        low (float, optional): lower bound. Defaults to ``None``.
        high (float, optional): upper bound. Defaults to ``None``.

    Raises:
        TypeError: if both bounds are ``None``, or a bound is a tensor of several elements.
        ValueError: if ``low >= high``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = ClipTransform(in_keys=["obs"], low=-1.0, high=1.0)
        >>> t(TensorDict({"obs": torch.tensor([-3.0, 0.5, 2.0])}))["obs"]
        tensor([-1.0000,  0.5000,  1.0000])
    """

    def __init__(
        self,
        in_keys: KeyArg = None,
        out_keys: KeyArg = None,
        in_keys_inv: KeyArg = None,
        out_keys_inv: KeyArg = None,
        *,
        low: float | None = None,
        high: float | None = None,
    ) -> None:
        if low is None and high is None:
            raise TypeError(
                "ClipTransform expected low and/or high, got neither. Either one or both of "
                "`high` and `low` must be provided: pass e.g. low=-1.0, high=1.0."
            )
        for name, bound in (("low", low), ("high", high)):
            if isinstance(bound, torch.Tensor) and bound.numel() != 1:
                raise TypeError(
                    f"ClipTransform expected scalar bounds, got {name} of shape "
                    f"{tuple(bound.shape)}: low and high must be scalars or None. Pass a float."
                )
        if low is not None and high is not None and low >= high:
            raise ValueError(
                f"ClipTransform expected low < high, got low={low}, high={high}: `low` must be "
                f"strictly lower than `high`. Swap them (or widen the interval)."
            )
        super().__init__(in_keys, out_keys, in_keys_inv, out_keys_inv)
        self.low = low
        self.high = high

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        return obs.clamp(self.low, self.high)

    _inv_apply_transform = _apply_transform

    def _transform_spec(self, spec: TensorSpec) -> TensorSpec:
        if isinstance(spec, Bounded):
            return Bounded(
                low=spec.low.clamp(self.low, self.high),
                high=spec.high.clamp(self.low, self.high),
                dtype=spec.dtype,
                device=spec.device,
            )
        low = self.low if self.low is not None else torch.finfo(spec.dtype).min
        high = self.high if self.high is not None else torch.finfo(spec.dtype).max
        return Bounded(low=low, high=high, shape=spec.shape, dtype=spec.dtype, device=spec.device)


class UnaryTransform(Transform):
    """Applies a unary operation on the specified inputs.

    Args:
        in_keys (sequence of NestedKey): entries read.
        out_keys (sequence of NestedKey): entries written.
        in_keys_inv (sequence of NestedKey, optional): base-side inverse entries. Defaults to ``None``.
        out_keys_inv (sequence of NestedKey, optional): policy-side inverse entries.
            Defaults to ``in_keys_inv``.

    Keyword Args:
        fn (callable): the forward operation.
        inv_fn (callable, optional): the inverse operation. Defaults to ``None`` (identity).
        use_raw_nontensor (bool, optional): pass non-tensor data unwrapped. Defaults to ``False``.

    Raises:
        TypeError: if ``fn`` is not callable.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = UnaryTransform(["x"], ["y"], fn=torch.exp)
        >>> t(TensorDict({"x": torch.zeros(2)}))["y"]
        tensor([1., 1.])
    """

    def __init__(
        self,
        in_keys: KeyArg,
        out_keys: KeyArg,
        in_keys_inv: KeyArg = None,
        out_keys_inv: KeyArg = None,
        *,
        fn: Callable[[Any], torch.Tensor | TensorDictBase],  # Any: a tensor or non-tensor data
        inv_fn: Callable[[Any], Any] | None = None,  # Any: a tensor or non-tensor data
        use_raw_nontensor: bool = False,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"UnaryTransform expected a callable fn, got {type(fn).__name__}.")
        super().__init__(in_keys, out_keys, in_keys_inv, out_keys_inv)
        self.fn = fn
        self.inv_fn = inv_fn
        self.use_raw_nontensor = use_raw_nontensor

    def _apply_transform(self, obs: Any) -> Any:  # Any: a tensor or non-tensor data
        if self.use_raw_nontensor and hasattr(obs, "data") and not isinstance(obs, torch.Tensor):
            obs = obs.data
        return self.fn(obs)

    def _inv_apply_transform(self, state: Any) -> Any:  # Any: a tensor or non-tensor data
        return self.inv_fn(state) if self.inv_fn is not None else state

    def _transform_spec(self, spec: TensorSpec) -> TensorSpec:
        probe = self.fn(spec.zero())
        return Unbounded(shape=probe.shape, dtype=probe.dtype, device=spec.device)

    def _transform_inv_spec(self, spec: TensorSpec) -> TensorSpec:
        if self.inv_fn is None:
            return spec.clone()
        return self._transform_spec(spec)


class FiniteTensorDictCheck(Transform):
    """This transform will check that all the items of the tensordict are finite, and raise an exception if they are not.

    Raises:
        ValueError: when a floating entry holds ``nan`` or ``inf``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = FiniteTensorDictCheck()
        >>> t(TensorDict({"a": torch.ones(2)}))["a"]
        tensor([1., 1.])
    """

    def __init__(self) -> None:
        super().__init__()

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        for key, value in next_tensordict.items(True, True):
            if (
                isinstance(value, torch.Tensor)
                and value.is_floating_point()
                and not bool(torch.isfinite(value).all())
            ):
                raise ValueError(
                    f"FiniteTensorDictCheck found non-finite values (nan or inf) at {key!r}. "
                    f"Check the environment or the transforms that produce this entry."
                )
        return next_tensordict

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return self._call(tensordict_reset)
