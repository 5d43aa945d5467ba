"""The running-statistics normalisers :class:`VecNorm` and :class:`VecNormV2` (the
fixed affine map, :class:`ObservationNorm`, is in ``_observation_norm``)."""

from __future__ import annotations

import warnings
from typing import Any

import torch
from tensordict import NestedKey, TensorDict, TensorDictBase

from rl_specs import TensorSpec, Unbounded
from rl_transforms._base import Transform
from rl_transforms._compose import Compose
from rl_transforms._key_lists import KeyArg, key_list
from rl_transforms._observation_norm import ObservationNorm


def _mean_std(stats: TensorDictBase, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    count = stats.get("count").clamp_min(1.0)
    mean = stats.get("sum") / count
    var = (stats.get("ssq") / count - mean.pow(2)).clamp_min(0.0)
    return mean, var.sqrt().clamp_min(eps)


class _RunningStats(Transform):
    """Shared machinery: per-key running sums with exponential decay, and a lock flag."""

    def __init__(
        self,
        in_keys: list[NestedKey],
        out_keys: KeyArg,
        *,
        decay: float,
        eps: float,
        shared: TensorDictBase | None,
        lock: object,
    ) -> None:
        super().__init__(in_keys, out_keys)
        if not 0.0 < decay <= 1.0:
            raise ValueError(
                f"{type(self).__name__} expected 0 < decay <= 1, got decay={decay}. Use e.g. decay=0.9999."
            )
        self.decay = decay
        self.eps = eps
        self.lock = lock
        self.frozen = False
        self._td = shared

    def _stats(self, key: NestedKey, value: torch.Tensor, batch_dims: int) -> TensorDictBase:
        td = self._td
        if td is None:
            td = self._td = TensorDict()
        entry = td.get(key, None)
        if entry is None:
            shape = value.shape[batch_dims:]
            zeros = torch.zeros(shape, dtype=torch.float64, device=value.device)
            entry = TensorDict(
                {"sum": zeros, "ssq": zeros.clone(), "count": torch.zeros((), dtype=torch.float64)},
                [],
            )
            td.set(key, entry)
        return entry

    def _moments(
        self, key: NestedKey, value: torch.Tensor, batch_dims: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Update the statistics of ``key`` with ``value`` (unless frozen); return mean and std."""
        stats = self._stats(key, value, batch_dims)
        if not self.frozen:
            flat = value.reshape(-1, *value.shape[batch_dims:]).to(torch.float64)
            decay = self.decay
            stats.get("sum").mul_(decay).add_(flat.sum(0))
            stats.get("ssq").mul_(decay).add_(flat.pow(2).sum(0))
            stats.get("count").mul_(decay).add_(flat.shape[0])
        return _mean_std(stats, self.eps)

    def _normalize(self, key: NestedKey, value: torch.Tensor, batch_dims: int) -> torch.Tensor:
        mean, std = self._moments(key, value, batch_dims)
        return ((value - mean) / std).to(
            value.dtype if value.is_floating_point() else torch.float32
        )

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        batch_dims = next_tensordict.batch_dims
        for in_key, out_key in zip(self._in_keys, self._out_keys):
            value = next_tensordict.get(in_key, None)
            if value is None:
                if self._missing_tolerance:
                    continue
                raise KeyError(
                    f"{type(self).__name__} expected {in_key!r} in the data, got "
                    f"{sorted(map(str, next_tensordict.keys(True, True)))}. Fix in_keys."
                )
            next_tensordict.set(out_key, self._normalize(in_key, value, batch_dims))
        return next_tensordict

    def _transform_spec(self, spec: TensorSpec) -> TensorSpec:
        dtype = spec.dtype if spec.dtype.is_floating_point else torch.float32
        return Unbounded(shape=spec.shape, dtype=dtype, device=spec.device)

    # error raised when a state dict without statistics is loaded into an initialized instance
    _void_state_error: type[Exception] = RuntimeError

    @property
    def initialized(self) -> bool:
        """Whether statistics exist (the transform has seen data, or loaded a state dict)."""
        return self._td is not None and not self._td.is_empty()

    def _check_initialized(self, what: str) -> None:
        if not self.initialized:
            raise RuntimeError(
                f"{type(self).__name__}.{what} needs statistics, got none yet. Make sure the "
                f"VecNorm has been initialized: put it in an env (or call it on data) first."
            )

    def _key_moments(self, key: NestedKey) -> tuple[torch.Tensor, torch.Tensor]:
        stats = self._td.get(key, None) if self._td is not None else None
        if stats is None:
            raise RuntimeError(
                f"{type(self).__name__} has no statistics for {key!r} yet. Make sure the "
                f"VecNorm has been initialized: run some steps that carry {key!r} first."
            )
        return _mean_std(stats, self.eps)

    def _moments_td(self, which: int) -> TensorDictBase:
        self._check_initialized("loc" if which == 0 else "scale")
        dtype = torch.get_default_dtype()
        out = TensorDict()
        for key in self._in_keys:
            out.set(key, self._key_moments(key)[which].to(dtype))
        return out

    @property
    def loc(self) -> TensorDictBase:
        """The running means, one entry per in_key (a :class:`~tensordict.TensorDict`)."""
        return self._moments_td(0)

    @property
    def scale(self) -> TensorDictBase:
        """The running standard deviations (at least ``eps``), one entry per in_key."""
        return self._moments_td(1)

    def _denormalize(self, key: NestedKey, value: torch.Tensor) -> torch.Tensor:
        mean, std = self._key_moments(key)
        return (value * std + mean).to(value.dtype)

    def denorm(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Map normalised entries back: reads each out_key, writes its in_key; stats unchanged.

        Raises:
            KeyError: if an out_key is missing from ``tensordict``.
            RuntimeError: if there are no statistics yet.
        """
        self._check_initialized("denorm")
        for in_key, out_key in zip(self._in_keys, self._out_keys):
            value = tensordict.get(out_key, None)
            if value is None:
                raise KeyError(
                    f"{type(self).__name__}.denorm expected the normalised entry {out_key!r}, "
                    f"got {sorted(map(str, tensordict.keys(True, True)))}."
                )
            tensordict.set(in_key, self._denormalize(in_key, value))
        return tensordict

    def freeze(self) -> _RunningStats:
        """Stop updating the statistics; returns the transform."""
        self.frozen = True
        return self

    def unfreeze(self) -> _RunningStats:
        """Resume updating the statistics; returns the transform."""
        self.frozen = False
        return self

    def frozen_copy(self) -> _RunningStats:
        """A parentless, frozen copy reading the same (shared) statistics.

        Raises:
            RuntimeError: if there are no statistics yet (nothing to share).
        """
        self._check_initialized("frozen_copy")
        out = self.clone()
        out._td = self._td
        return out.freeze()

    def get_extra_state(self) -> dict:
        if not self.initialized:
            warnings.warn(
                f"Querying state_dict on an uninitialized {type(self).__name__}: the state "
                f"dict carries no statistics. Run some steps first to save them.",
                UserWarning,
                stacklevel=2,
            )
        return {
            "stats": self._td.to_dict() if self.initialized else None,
            "frozen": self.frozen,
        }

    def set_extra_state(self, state: dict) -> None:
        stats = state.get("stats")
        if stats is None:
            if self.initialized:
                raise self._void_state_error(
                    f"{type(self).__name__}.load_state_dict called with a void state-dict while "
                    f"the instance is initialized. Could not find a tensordict of statistics "
                    f"in the state dict; load one saved after some steps."
                )
        else:
            loaded = TensorDict(stats, [])
            if not self.initialized:
                if self._td is None:
                    warnings.warn(
                        f"{type(self).__name__} wasn't initialized and the tensordict is not "
                        f"shared: the loaded statistics are not shared with other instances. "
                        f"Pass shared_td/shared_data to share them.",
                        UserWarning,
                        stacklevel=2,
                    )
                    self._td = loaded
                else:
                    self._td.update(loaded)
            elif set(loaded.keys(True, True)) == set(self._td.keys(True, True)):
                self._td.update_(loaded)
            else:
                self._td.update(loaded)
        self.frozen = bool(state.get("frozen", False))

    def _shared_on_clone(self) -> tuple[Any, ...]:  # Any: the statistics tensordict
        return () if self._td is None else (self._td,)

    def to_observation_norm(self) -> Transform:
        """The current statistics as a fixed normaliser.

        Returns an :class:`ObservationNorm` for one in_key, a :class:`Compose` of them
        (one per in_key) otherwise.

        Raises:
            RuntimeError: if there are no statistics yet for some in_key.
        """
        norms = []
        for in_key, out_key in zip(self._in_keys, self._out_keys):
            mean, std = self._key_moments(in_key)
            norms.append(
                ObservationNorm(
                    loc=mean.float(),
                    scale=std.float(),
                    in_keys=[in_key],
                    out_keys=[out_key],
                    standard_normal=True,
                )
            )
        if len(norms) == 1:
            return norms[0]
        return Compose(*norms)


class VecNorm(_RunningStats):
    """Moving average normalization layer for torchrl environments.

    Keeps decayed running sums of each entry (shared between clones and through
    ``shared_td``) and outputs ``(x - mean) / std``.

    Args:
        in_keys (sequence of NestedKey, optional): entries to normalise. Defaults to
            ``["observation", "reward"]``.
        out_keys (sequence of NestedKey, optional): destination entries. Defaults to ``in_keys``.
        shared_td (TensorDictBase, optional): statistics shared with other instances.
            Defaults to ``None``.
        lock (object, optional): a lock guarding shared updates. Defaults to ``None``.
        decay (float, optional): decay of the running sums. Defaults to ``0.9999``.
        eps (float, optional): lower bound of the standard deviation. Defaults to ``1e-4``.
        shapes (list of torch.Size, optional): unused; shapes are inferred. Defaults to ``None``.

    Keyword Args:
        new_api (bool, optional): ``True`` builds a :class:`VecNormV2` from the other
            arguments instead. Defaults to ``None`` (this class).

    Raises:
        ValueError: if ``decay`` is not in ``(0, 1]``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = VecNorm(in_keys=["obs"], decay=1.0)
        >>> out = t(TensorDict({"obs": torch.tensor([[1.0], [3.0]])}, [2]))["obs"]
        >>> out.squeeze(-1)
        tensor([-1.,  1.])
    """

    _void_state_error = KeyError

    def __new__(cls, *args: Any, new_api: bool | None = None, **kwargs: Any) -> Any:
        # Any: VecNorm's or VecNormV2's own arguments, forwarded as given
        if new_api:
            return VecNormV2(*args, **kwargs)
        return super().__new__(cls)

    def __init__(
        self,
        in_keys: KeyArg = None,
        out_keys: KeyArg = None,
        shared_td: TensorDictBase | None = None,
        lock: object = None,
        decay: float = 0.9999,
        eps: float = 1e-4,
        shapes: list[torch.Size] | None = None,
        *,
        new_api: bool | None = None,
    ) -> None:
        keys = (
            key_list(in_keys, owner="VecNorm", name="in_keys")
            if in_keys is not None
            else ["observation", "reward"]
        )
        super().__init__(keys, out_keys, decay=decay, eps=eps, shared=shared_td, lock=lock)
        self.shapes = shapes

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return self._call_tolerant(tensordict_reset)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self._call(next_tensordict)


class VecNormV2(_RunningStats):
    """A class for normalizing vectorized observations and rewards in reinforcement learning environments.

    Like :class:`VecNorm`, but the statistics live on the transform (``stateful=True``)
    and a reward key is normalised by its running standard deviation only (no centring).

    Args:
        in_keys (sequence of NestedKey): entries to normalise.
        out_keys (sequence of NestedKey, optional): destination entries. Defaults to ``in_keys``.

    Keyword Args:
        lock (object, optional): a lock guarding shared updates. Defaults to ``None``.
        stateful (bool, optional): keep statistics on the transform. Defaults to ``True``.
        decay (float, optional): decay of the running sums. Defaults to ``0.9999``.
        eps (float, optional): lower bound of the standard deviation. Defaults to ``1e-4``.
        shared_data (TensorDictBase, optional): statistics shared with other instances.
            Defaults to ``None``.
        reduce_batch_dims (bool, optional): accepted for compatibility; batch dims are
            always reduced. Defaults to ``False``.

    Raises:
        ValueError: if ``stateful`` is ``False`` (only the stateful mode is provided).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = VecNormV2(in_keys=["obs"], decay=1.0)
        >>> t(TensorDict({"obs": torch.tensor([[1.0], [3.0]])}, [2]))["obs"].squeeze(-1)
        tensor([-1.,  1.])
    """

    def __init__(
        self,
        in_keys: KeyArg,
        out_keys: KeyArg = None,
        *,
        lock: object = None,
        stateful: bool = True,
        decay: float = 0.9999,
        eps: float = 1e-4,
        shared_data: TensorDictBase | None = None,
        reduce_batch_dims: bool = False,
    ) -> None:
        if not stateful:
            raise ValueError(
                "VecNormV2 supports stateful=True only (statistics kept on the transform). "
                "Drop stateful=False."
            )
        keys = key_list(in_keys, owner="VecNormV2", name="in_keys")
        super().__init__(keys, out_keys, decay=decay, eps=eps, shared=shared_data, lock=lock)
        self.stateful = stateful
        self.reduce_batch_dims = reduce_batch_dims

    def _normalize(self, key: NestedKey, value: torch.Tensor, batch_dims: int) -> torch.Tensor:
        last = key if isinstance(key, str) else key[-1]
        if last != "reward":
            return super()._normalize(key, value, batch_dims)
        _, std = self._moments(key, value, batch_dims)
        return (value / std).to(value.dtype)

    def _denormalize(self, key: NestedKey, value: torch.Tensor) -> torch.Tensor:
        last = key if isinstance(key, str) else key[-1]
        if last != "reward":
            return super()._denormalize(key, value)
        _, std = self._key_moments(key)
        return (value * std).to(value.dtype)
