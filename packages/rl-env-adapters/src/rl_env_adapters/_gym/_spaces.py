"""Conversion of gym / gymnasium spaces to rl-specs specs, and its registry.

Each space type maps to one conversion function. The built-in ones are registered
by class name (``"Box"``, ``"Discrete"``, ...), so nothing here imports gym: the
lookup walks the space's MRO and matches either a registered class or a registered
name. Users add their own with :func:`register_gym_spec_conversion`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from rl_specs import (
    Binary,
    Bounded,
    Categorical,
    Composite,
    MultiCategorical,
    MultiOneHot,
    NonTensor,
    OneHot,
    TensorSpec,
    Unbounded,
)

__all__ = ["gym_space_to_spec", "register_gym_spec_conversion"]

# Any: a converter receives a gym space, a type this package never imports at load time.
Converter = Callable[..., TensorSpec]

_CONVERTERS: dict[type | str, Converter] = {}


def register_gym_spec_conversion(spec_type: type | str) -> Callable[[Converter], Converter]:
    """Decorator to register a conversion function for a specific spec type.

    ``spec_type`` is a space class, or its name as found in ``gym(nasium).spaces``
    (``"Box"``, or a dotted path ending with the class name). The function is called
    as ``fun(spec, dtype=None, device=None, categorical_action_encoding=None,
    remap_state_to_observation=None, batch_size=None)`` and returns a ``TensorSpec``;
    unused keywords may be gathered in ``**kwargs``. A later registration for the same
    type replaces the earlier one.

    Args:
        spec_type (type or str): the space class, or its name.

    Raises:
        TypeError: if ``spec_type`` is neither a class nor a string.

    Examples:
        >>> import gymnasium
        >>> from rl_specs import Unbounded
        >>> from rl_env_adapters import register_gym_spec_conversion
        >>> from rl_env_adapters._gym._spaces import gym_space_to_spec
        >>> class Angle(gymnasium.spaces.Box):
        ...     pass
        >>> @register_gym_spec_conversion(Angle)
        ... def convert_angle(spec, dtype=None, device=None, **kwargs):
        ...     return Unbounded(shape=spec.shape, device=device, dtype=torch.float64)
        >>> gym_space_to_spec(Angle(-1.0, 1.0, shape=(2,))).dtype
        torch.float64
    """
    if not isinstance(spec_type, (type, str)):
        raise TypeError(
            f"register_gym_spec_conversion expected a space class or its name (str), got "
            f"{type(spec_type).__name__}. Pass e.g. gymnasium.spaces.Box or 'Box'."
        )

    def decorator(fun: Converter) -> Converter:
        _CONVERTERS[spec_type] = fun
        return fun

    return decorator


def _find_converter(space: Any) -> Converter:
    for cls in type(space).__mro__:
        fun = _CONVERTERS.get(cls)
        if fun is not None:
            return fun
        path = f"{cls.__module__}.{cls.__qualname__}"
        for key, fun in _CONVERTERS.items():
            if isinstance(key, str) and (key == cls.__name__ or path.endswith("." + key)):
                return fun
    known = sorted(k if isinstance(k, str) else k.__name__ for k in _CONVERTERS)
    raise TypeError(
        f"No spec conversion for the space {type(space).__name__} ({space!r}). Known spaces: "
        f"{known}. Register one with @register_gym_spec_conversion({type(space).__name__})."
    )


def gym_space_to_spec(
    space: Any,
    *,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
    categorical_action_encoding: bool = False,
    remap_state_to_observation: bool = True,
    batch_size: tuple[int, ...] | torch.Size = (),
) -> TensorSpec:
    """Convert a gym / gymnasium space into the matching spec.

    Args:
        space (gym.Space): the space to convert.

    Keyword Args:
        dtype (torch.dtype, optional): force this dtype on leaves. Defaults to the space's.
        device (torch.device, optional): the spec device. Defaults to ``None`` (cpu).
        categorical_action_encoding (bool, optional): ``Discrete`` / ``MultiDiscrete``
            become ``Categorical`` / ``MultiCategorical`` (index values) instead of
            ``OneHot`` / ``MultiOneHot``. Defaults to ``False``.
        remap_state_to_observation (bool, optional): a ``"state"`` key of a ``Dict``
            space is renamed ``"observation"``. Defaults to ``True``.
        batch_size (torch.Size, optional): leading dims prepended to every leaf (vector
            envs). Defaults to ``()``.

    Raises:
        TypeError: if no conversion is registered for the space (or one of its children).

    Examples:
        >>> import gymnasium
        >>> spec = gym_space_to_spec(gymnasium.spaces.Discrete(3))
        >>> type(spec).__name__, spec.shape
        ('OneHot', torch.Size([3]))
        >>> spec = gym_space_to_spec(gymnasium.spaces.Discrete(3), categorical_action_encoding=True)
        >>> type(spec).__name__, spec.shape
        ('Categorical', torch.Size([]))
    """
    spec = _convert(
        space,
        dtype=dtype,
        device=device,
        categorical_action_encoding=categorical_action_encoding,
        remap_state_to_observation=remap_state_to_observation,
    )
    batch_size = tuple(batch_size)
    if batch_size:
        spec = spec.expand(*batch_size, *spec.shape)
    return spec


def _convert(space: Any, **kwargs: Any) -> TensorSpec:
    kwargs["batch_size"] = None  # batch dims are added once, at the top
    return _find_converter(space)(space, **kwargs)


def numpy_to_torch_dtype(dtype: Any) -> torch.dtype:
    """Map a numpy dtype to the torch dtype ``torch.from_numpy`` would produce."""
    return torch.from_numpy(np.empty(0, dtype=np.dtype(dtype))).dtype


def _bounds(space: Any, device: Any) -> tuple[torch.Tensor, torch.Tensor]:
    low = torch.as_tensor(np.broadcast_to(space.low, space.shape).copy(), device=device)
    high = torch.as_tensor(np.broadcast_to(space.high, space.shape).copy(), device=device)
    return low, high


@register_gym_spec_conversion("Box")
def _convert_box(
    space: Any, dtype: torch.dtype | None = None, device: Any = None, **_: Any
) -> TensorSpec:
    dtype = dtype or numpy_to_torch_dtype(space.dtype)
    low, high = _bounds(space, device)
    if dtype.is_floating_point and bool(torch.isinf(low).all()) and bool(torch.isinf(high).all()):
        return Unbounded(shape=space.shape, device=device, dtype=dtype)
    return Bounded(
        low=low.to(dtype), high=high.to(dtype), shape=space.shape, device=device, dtype=dtype
    )


def _index_spec(
    nvec: np.ndarray, start: np.ndarray, categorical: bool, dtype: torch.dtype | None, device: Any
) -> TensorSpec:
    """Spec of integer indices ``start + [0, nvec)``: one-hot or categorical as asked."""
    if np.any(start != 0):
        low = torch.as_tensor(start, dtype=torch.int64, device=device)
        high = torch.as_tensor(start + nvec - 1, dtype=torch.int64, device=device)
        return Bounded(
            low=low, high=high, shape=low.shape, device=device, dtype=dtype or torch.int64
        )
    if nvec.ndim == 0:
        if categorical:
            return Categorical(int(nvec), device=device, dtype=dtype or torch.int64)
        return OneHot(int(nvec), device=device, dtype=dtype or torch.bool)
    if categorical:
        return MultiCategorical(nvec.tolist(), device=device, dtype=dtype or torch.int64)
    if nvec.ndim > 1:
        raise ValueError(
            f"MultiDiscrete spaces with a {nvec.ndim}-d nvec (shape {nvec.shape}) have no one-hot "
            "spec. Build the env with categorical_action_encoding=True to get a MultiCategorical."
        )
    return MultiOneHot(nvec.tolist(), device=device, dtype=dtype or torch.bool)


@register_gym_spec_conversion("Discrete")
def _convert_discrete(
    space: Any,
    dtype: torch.dtype | None = None,
    device: Any = None,
    categorical_action_encoding: bool | None = None,
    **_: Any,
) -> TensorSpec:
    start = np.asarray(getattr(space, "start", 0))
    return _index_spec(np.asarray(space.n), start, bool(categorical_action_encoding), dtype, device)


@register_gym_spec_conversion("MultiDiscrete")
def _convert_multi_discrete(
    space: Any,
    dtype: torch.dtype | None = None,
    device: Any = None,
    categorical_action_encoding: bool | None = None,
    **_: Any,
) -> TensorSpec:
    nvec = np.asarray(space.nvec)
    start = np.broadcast_to(np.asarray(getattr(space, "start", 0)), nvec.shape)
    return _index_spec(nvec, start, bool(categorical_action_encoding), dtype, device)


@register_gym_spec_conversion("MultiBinary")
def _convert_multi_binary(
    space: Any, dtype: torch.dtype | None = None, device: Any = None, **_: Any
) -> TensorSpec:
    dtype = dtype or numpy_to_torch_dtype(space.dtype)
    return Binary(shape=space.shape, device=device, dtype=dtype)


@register_gym_spec_conversion("Dict")
def _convert_dict(
    space: Any,
    remap_state_to_observation: bool | None = None,
    device: Any = None,
    **kwargs: Any,
) -> TensorSpec:
    children = {}
    for key, sub in space.spaces.items():
        name = "observation" if remap_state_to_observation and key == "state" else key
        children[name] = _convert(sub, device=device, remap_state_to_observation=False, **kwargs)
    return Composite(children, shape=(), device=device)


@register_gym_spec_conversion("Tuple")
def _convert_tuple(space: Any, **kwargs: Any) -> TensorSpec:
    specs = [_convert(sub, **kwargs) for sub in space.spaces]
    if not specs:
        raise ValueError(
            "Cannot convert an empty Tuple space: it holds no entry. Drop it from the env."
        )
    first = specs[0]
    if all(spec == first for spec in specs[1:]):
        return first.unsqueeze(0).expand(len(specs), *first.shape)
    try:
        return torch.stack(specs, 0)
    except (TypeError, RuntimeError) as err:
        raise TypeError(
            f"The Tuple space {space!r} holds spaces of different types or shapes, which have "
            "no stacked spec here. Use a Dict space, or register a conversion for this space "
            "with @register_gym_spec_conversion."
        ) from err


@register_gym_spec_conversion("Text")
def _convert_text(space: Any, device: Any = None, **_: Any) -> TensorSpec:
    return NonTensor(shape=(), device=device, example_data="")
