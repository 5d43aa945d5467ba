"""Value converters between gym's numpy values and tensors, compiled once per spec.

``make_reader`` turns an observation (array, int, dict, tuple, str) into what the
spec describes; ``make_writer`` turns an action tensor into what the gym env takes.
Both walk the spec once, at construction, and return small closures so the per-step
cost is one call per leaf.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from rl_specs import Composite, MultiOneHot, NonTensor, OneHot, TensorSpec

__all__ = ["make_reader", "make_writer"]

# Any: gym values are arrays, python scalars, dicts, tuples or strings.
Reader = Callable[[Any], Any]
Writer = Callable[[torch.Tensor], Any]


def _as_tensor(device: torch.device | None) -> Reader:
    if device is None or device.type == "cpu":

        def read(value: Any) -> torch.Tensor:
            if type(value) is np.ndarray:
                return torch.from_numpy(value)
            return torch.as_tensor(np.asarray(value))

        return read

    def read_to(value: Any) -> torch.Tensor:
        return torch.as_tensor(np.asarray(value)).to(device, non_blocking=True)

    return read_to


def _is_tuple_space(space: Any) -> bool:
    return any(cls.__name__ == "Tuple" for cls in type(space).__mro__)


def make_reader(space: Any, spec: TensorSpec, *, batch_dims: int = 0) -> Reader:
    """Build the function that maps a value of ``space`` to a value of ``spec``.

    Dict spaces give nested dicts of tensors (keys renamed as in the spec), Tuple
    spaces stacked tensors, Text spaces the string itself. ``spec`` is the spec of
    one env; ``batch_dims`` says how many batch dims the values carry (vector envs).

    Examples:
        >>> import gymnasium
        >>> from rl_env_adapters._gym._spaces import gym_space_to_spec
        >>> space = gymnasium.spaces.Discrete(3)
        >>> read = make_reader(space, gym_space_to_spec(space))
        >>> read(2)
        tensor([False, False,  True])
    """
    if _is_tuple_space(space):
        if any(d < 0 for d in spec.shape):
            raise TypeError(
                f"The Tuple space {space!r} holds entries of different shapes: its values have "
                "no dense tensor. Flatten it (gymnasium.wrappers.FlattenObservation) or use a "
                "Dict space."
            )
        parts = spec.unbind(0)
        if any(isinstance(part, Composite) for part in parts):
            raise TypeError(
                f"Tuple spaces of Dict spaces have no dense reader ({space!r}). Flatten the "
                "space with gymnasium.wrappers.FlattenObservation before wrapping the env."
            )
        subs = [make_reader(sub, part) for sub, part in zip(space.spaces, parts, strict=True)]
        return lambda value: torch.stack(
            [read(v) for read, v in zip(subs, value, strict=True)], batch_dims
        )
    if isinstance(spec, Composite):
        keys = list(spec.keys())
        src = list(space.spaces.keys())
        readers = [
            make_reader(space.spaces[s], spec[k], batch_dims=batch_dims)
            for s, k in zip(src, keys, strict=True)
        ]
        pairs = list(zip(src, keys, readers, strict=True))
        return lambda value: {k: read(value[s]) for s, k, read in pairs}
    if isinstance(spec, NonTensor):
        return lambda value: value
    base = _as_tensor(spec.device)
    if isinstance(spec, MultiOneHot):
        nvec = [int(n) for n in spec.nvec]
        dtype = spec.dtype
        return lambda value: torch.cat(
            [F.one_hot(idx, n) for idx, n in zip(base(value).long().unbind(-1), nvec, strict=True)],
            -1,
        ).to(dtype)
    if isinstance(spec, OneHot):
        n, dtype = spec.space.n, spec.dtype
        return lambda value: F.one_hot(base(value).long(), n).to(dtype)
    dtype = spec.dtype
    shape = spec.shape if batch_dims == 0 and -1 not in spec.shape else None
    on_cpu = spec.device is None or spec.device.type == "cpu"

    def read(value: Any) -> torch.Tensor:
        # on the cpu an array is taken as it is (what base does, one call less a step)
        out = torch.from_numpy(value) if on_cpu and type(value) is np.ndarray else base(value)
        if shape is not None and out.shape != shape and out.numel() == shape.numel():
            out = out.reshape(shape)  # a bare float from a Box(-1, 1) env: shape (1,)
        return out if out.dtype is dtype else out.to(dtype)

    return read


def _write_one_hot(action: torch.Tensor) -> Any:
    """The index of the (first) largest entry of each one-hot vector, as numpy's argmax."""
    if action.ndim == 1 and not action.is_floating_point():
        # one integer/bool vector: a python list is cheaper than the numpy round trip
        row = action.tolist()
        return np.int64(row.index(max(row)))
    return action.detach().cpu().numpy().argmax(-1)


def make_writer(space: Any, spec: TensorSpec, *, batch_dims: int = 0) -> Writer:
    """Build the function that maps an action tensor of ``spec`` to an action of ``space``.

    Examples:
        >>> import gymnasium, torch
        >>> from rl_specs import OneHot
        >>> write = make_writer(gymnasium.spaces.Discrete(3), OneHot(3))
        >>> int(write(torch.tensor([False, True, False])))
        1
    """
    if _is_tuple_space(space):
        parts = spec.unbind(0)
        subs = [make_writer(sub, part) for sub, part in zip(space.spaces, parts, strict=True)]
        return lambda action: tuple(
            write(a) for write, a in zip(subs, action.unbind(batch_dims), strict=True)
        )
    if isinstance(spec, Composite):
        writers = [
            (key, make_writer(space.spaces[key], spec[key], batch_dims=batch_dims))
            for key in spec.keys()
        ]
        # gym's Dict spaces hold arrays: a scalar action becomes a 0-d array there
        return lambda action: {
            key: _array(write(action.get(key))) for key, write in writers
        }
    if isinstance(spec, MultiOneHot):
        sizes = [int(n) for n in spec.nvec]
        return lambda action: np.stack(
            [part.long().argmax(-1).cpu().numpy() for part in action.split(sizes, -1)], -1
        )
    if isinstance(spec, OneHot):
        return _write_one_hot
    if isinstance(spec, NonTensor):
        return lambda action: action
    if spec.dtype.is_floating_point:
        return lambda action: action.detach().cpu().numpy()
    kind = type(spec).__name__

    def write_index(action: torch.Tensor) -> Any:
        if action.is_floating_point():
            raise TypeError(
                f"The action spec is {kind} with dtype {spec.dtype}, got a {action.dtype} action. "
                f"Give integer actions (e.g. action.long()), or build the env with "
                f"categorical_action_encoding=False to pass one-hot actions."
            )
        out = action.detach().cpu().numpy()
        # a lone index goes as a numpy integer: envs use it as a dict key (CliffWalking)
        return out[()] if out.ndim == 0 else out

    return write_index


def _array(value: Any) -> Any:
    """A numpy scalar as a 0-d array; anything else unchanged."""
    return np.asarray(value) if isinstance(value, np.generic) else value
