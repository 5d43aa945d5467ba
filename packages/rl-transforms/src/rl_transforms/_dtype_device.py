"""Dtype and device casts: :class:`DTypeCastTransform`, :class:`DoubleToFloat`,
:class:`DeviceCastTransform` and :class:`PinMemoryTransform`."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from rl_specs import Composite, TensorSpec
from rl_transforms._base import Transform
from rl_transforms._key_lists import KeyArg

DeviceLike = torch.device | str | int | None


class DTypeCastTransform(Transform):
    """Casts one dtype to another for selected keys.

    Forward calls cast ``dtype_in`` entries to ``dtype_out``; the inverse casts the
    policy's ``dtype_out`` entries back to ``dtype_in`` before the base env's step.

    Args:
        dtype_in (torch.dtype): the dtype of the base env's entries.
        dtype_out (torch.dtype): the dtype seen by the policy.
        in_keys (sequence of NestedKey, optional): entries to cast. Defaults to every
            observation and reward entry of dtype ``dtype_in`` (every such tensor
            outside an env).
        out_keys (sequence of NestedKey, optional): destination entries. Defaults to ``in_keys``.
        in_keys_inv (sequence of NestedKey, optional): base-side entries of the inverse
            cast (e.g. ``["action"]``). Defaults to ``[]``.
        out_keys_inv (sequence of NestedKey, optional): policy-side entries of the inverse
            cast. Defaults to ``in_keys_inv``.

    Raises:
        TypeError: if a dtype is not a ``torch.dtype``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = DTypeCastTransform(torch.float64, torch.float32, in_keys=["obs"])
        >>> t(TensorDict({"obs": torch.zeros(2, dtype=torch.float64)}))["obs"].dtype
        torch.float32
    """

    def __init__(
        self,
        dtype_in: torch.dtype,
        dtype_out: torch.dtype,
        in_keys: KeyArg = None,
        out_keys: KeyArg = None,
        in_keys_inv: KeyArg = None,
        out_keys_inv: KeyArg = None,
    ) -> None:
        for name, dtype in (("dtype_in", dtype_in), ("dtype_out", dtype_out)):
            if not isinstance(dtype, torch.dtype):
                raise TypeError(
                    f"{type(self).__name__} expected {name} to be a torch.dtype, got {dtype!r}. "
                    f"Pass e.g. {name}=torch.float32."
                )
        super().__init__(in_keys, out_keys, in_keys_inv, out_keys_inv)
        self.dtype_in = dtype_in
        self.dtype_out = dtype_out
        self._auto_keys = in_keys is None

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        return obs.to(self.dtype_out)

    def _inv_apply_transform(self, state: torch.Tensor) -> torch.Tensor:
        return state.to(self.dtype_in)

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        if self._auto_keys and "resolved" not in self._lazy:
            for key, value in list(next_tensordict.items(True, True)):
                if isinstance(value, torch.Tensor) and value.dtype == self.dtype_in:
                    next_tensordict.set(key, value.to(self.dtype_out))
            return next_tensordict
        if not self._in_keys:  # nothing of dtype_in in the env (e.g. an all-float32 env)
            return next_tensordict
        return super()._call(next_tensordict)

    def _transform_spec(self, spec: TensorSpec) -> TensorSpec:
        return spec.to(self.dtype_out) if spec.dtype == self.dtype_in else spec.clone()

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        if self._auto_keys:
            keys = [
                key
                for role in ("full_observation_spec", "full_reward_spec")
                for key, leaf in output_spec[role].items(True, True)
                if leaf.dtype == self.dtype_in
            ]
            self._in_keys = list(keys)
            self._out_keys = list(keys)
            self._lazy["resolved"] = True
        return super().transform_output_spec(output_spec)

    def _clear_cache(self) -> None:
        super()._clear_cache()
        if self.__dict__.get("_auto_keys"):
            self._in_keys = []
            self._out_keys = []

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(dtype_in={self.dtype_in}, dtype_out={self.dtype_out}, "
            f"in_keys={self.in_keys}, in_keys_inv={self.in_keys_inv})"
        )


class DoubleToFloat(DTypeCastTransform):
    """Casts one dtype to another for selected keys: ``float64`` to ``float32``.

    Args:
        in_keys (sequence of NestedKey, optional): entries to cast. Defaults to every
            ``float64`` observation and reward.
        out_keys (sequence of NestedKey, optional): destination entries. Defaults to ``in_keys``.
        in_keys_inv (sequence of NestedKey, optional): base-side entries cast back to
            ``float64`` before a step (e.g. ``["action"]``). Defaults to ``[]``.
        out_keys_inv (sequence of NestedKey, optional): policy-side entries of the inverse
            cast. Defaults to ``in_keys_inv``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = DoubleToFloat(in_keys_inv=["action"])
        >>> t(TensorDict({"obs": torch.zeros(2, dtype=torch.float64)}))["obs"].dtype
        torch.float32
        >>> t.inv(TensorDict({"action": torch.zeros(2)}))["action"].dtype
        torch.float64
    """

    def __init__(
        self,
        in_keys: KeyArg = None,
        out_keys: KeyArg = None,
        in_keys_inv: KeyArg = None,
        out_keys_inv: KeyArg = None,
    ) -> None:
        super().__init__(torch.float64, torch.float32, in_keys, out_keys, in_keys_inv, out_keys_inv)


def _without_device(tensordict: TensorDictBase) -> TensorDictBase:
    """``tensordict`` without a device constraint (a shallow copy when it has one)."""
    if tensordict.device is None:
        return tensordict
    return tensordict.copy().clear_device_()


class DeviceCastTransform(Transform):
    """Moves data from one device to another.

    Without keys, the whole tensordict moves; with keys, only those entries.

    Args:
        device (torch.device): the device seen by the policy.
        orig_device (torch.device, optional): the base env's device (target of the
            inverse). Defaults to ``None`` (the input's device is kept on inverse).

    Keyword Args:
        in_keys (sequence of NestedKey, optional): entries to move. Defaults to all.
        out_keys (sequence of NestedKey, optional): destination entries. Defaults to ``in_keys``.
        in_keys_inv (sequence of NestedKey, optional): entries moved back. Defaults to all.
        out_keys_inv (sequence of NestedKey, optional): policy-side entries. Defaults to ``in_keys_inv``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = DeviceCastTransform("cpu")
        >>> t(TensorDict({"obs": torch.zeros(2)}, batch_size=[2])).device
        device(type='cpu')
    """

    def __init__(
        self,
        device: DeviceLike,
        orig_device: DeviceLike = None,
        *,
        in_keys: KeyArg = None,
        out_keys: KeyArg = None,
        in_keys_inv: KeyArg = None,
        out_keys_inv: KeyArg = None,
    ) -> None:
        super().__init__(in_keys, out_keys, in_keys_inv, out_keys_inv)
        self.device = torch.device(device)
        self.orig_device = torch.device(orig_device) if orig_device is not None else None

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        return obs.to(self.device, non_blocking=True)

    def _inv_apply_transform(self, state: torch.Tensor) -> torch.Tensor:
        return (
            state.to(self.orig_device, non_blocking=True) if self.orig_device is not None else state
        )

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        if not self._in_keys:
            return next_tensordict.to(self.device, non_blocking=True)
        # some entries move: the data no longer has one device
        return super()._call(_without_device(next_tensordict))

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not self._in_keys_inv:
            if self.orig_device is None:
                return tensordict
            return tensordict.to(self.orig_device, non_blocking=True)
        return super()._inv_call(_without_device(tensordict))

    def transform_env_device(self, device: torch.device | None) -> torch.device | None:
        """The cast device when the whole data moves; ``None`` (mixed) when only some keys do.

        An unset ``orig_device`` becomes the device of the env the transform is attached to.
        """
        if self.orig_device is None and device is not None:
            self.orig_device = torch.device(device)
        return self.device if not self._in_keys else None

    def _has_inverse(self) -> bool:
        return self.orig_device is not None or bool(self._in_keys_inv)

    def _transform_spec(self, spec: TensorSpec) -> TensorSpec:
        return spec.to(self.device)

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        if not self._in_keys:
            return output_spec.to(self.device)
        return super().transform_output_spec(output_spec.clear_device_())

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        if not self._in_keys_inv:
            return input_spec.to(self.device)
        return super().transform_input_spec(input_spec.clear_device_())

    def __repr__(self) -> str:
        return f"DeviceCastTransform(device={self.device}, orig_device={self.orig_device})"


class PinMemoryTransform(Transform):
    """Calls ``pin_memory`` on the tensordict to facilitate writing on CUDA devices.

    Without CUDA, pinning is unavailable and the data pass through unchanged.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> PinMemoryTransform()(TensorDict({"obs": torch.ones(2)}))["obs"]
        tensor([1., 1.])
    """

    def __init__(self) -> None:
        super().__init__()

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        if torch.cuda.is_available() and next_tensordict.device in (None, torch.device("cpu")):
            return next_tensordict.pin_memory()
        return next_tensordict
