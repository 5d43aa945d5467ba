"""Normalisation: :class:`ObservationNorm` (fixed affine map) and the running-statistics
normalisers :class:`VecNorm` and :class:`VecNormV2`."""

from __future__ import annotations

import warnings
from typing import Any

import torch
from tensordict import NestedKey, TensorDict, TensorDictBase

from rl_specs import Bounded, TensorSpec, Unbounded
from rl_transforms._base import Transform
from rl_transforms._compose import Compose
from rl_transforms._key_lists import KeyArg, key_list


def _as_buffer(value: float | torch.Tensor | None) -> torch.Tensor | None:
    if value is None:
        return None
    return torch.as_tensor(value, dtype=torch.get_default_dtype()).clone()


class ObservationNorm(Transform):
    """Observation affine transformation layer.

    With ``standard_normal=False`` the output is ``obs * scale + loc``; with
    ``standard_normal=True`` it is ``(obs - loc) / scale``. The inverse applies the
    opposite map (for ``in_keys_inv``).

    Args:
        loc (float or torch.Tensor, optional): the location. Defaults to ``None`` (set
            by :meth:`init_stats`).
        scale (float or torch.Tensor, optional): the scale. Defaults to ``None`` (set
            by :meth:`init_stats`).
        in_keys (sequence of NestedKey, optional): entries to normalise. Defaults to
            ``["observation"]``.
        out_keys (sequence of NestedKey, optional): destination entries. Defaults to ``in_keys``.
        in_keys_inv (sequence of NestedKey, optional): base-side inverse entries. Defaults to ``[]``.
        out_keys_inv (sequence of NestedKey, optional): policy-side inverse entries.
            Defaults to ``in_keys_inv``.
        standard_normal (bool, optional): see above. Defaults to ``False``.
        eps (float, optional): lower bound of the scale computed by :meth:`init_stats`.
            Defaults to ``1e-8``.

    Raises:
        RuntimeError: if used before ``loc`` and ``scale`` are known.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = ObservationNorm(loc=1.0, scale=2.0, standard_normal=True)
        >>> t(TensorDict({"observation": torch.tensor([3.0, 5.0])}))["observation"]
        tensor([1., 2.])
    """

    def __init__(
        self,
        loc: float | torch.Tensor | None = None,
        scale: float | torch.Tensor | None = None,
        in_keys: KeyArg = None,
        out_keys: KeyArg = None,
        in_keys_inv: KeyArg = None,
        out_keys_inv: KeyArg = None,
        standard_normal: bool = False,
        eps: float = 1e-8,
    ) -> None:
        super().__init__(
            in_keys if in_keys is not None else ["observation"], out_keys, in_keys_inv, out_keys_inv
        )
        self.standard_normal = standard_normal
        self.eps = eps
        self.register_buffer("loc", _as_buffer(loc))
        self.register_buffer("scale", _as_buffer(scale))

    @property
    def initialized(self) -> bool:
        """Whether ``loc`` and ``scale`` are set."""
        return self.loc is not None and self.scale is not None

    def _check_initialized(self) -> None:
        if not self.initialized:
            raise RuntimeError(
                "ObservationNorm has no loc/scale yet. Pass loc= and scale= to the "
                "constructor, or call transform.init_stats(num_iter) once it is in an env."
            )

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        buffers = self._buffers
        loc, scale = buffers["loc"], buffers["scale"]
        if loc is None or scale is None:
            self._check_initialized()
        if self.standard_normal:
            return (obs - loc) / scale
        return torch.addcmul(loc, obs, scale)

    def _inv_apply_transform(self, state: torch.Tensor) -> torch.Tensor:
        self._check_initialized()
        if self.standard_normal:
            return state * self.scale + self.loc
        return (state - self.loc) / self.scale

    def _transform_spec(self, spec: TensorSpec) -> TensorSpec:
        if isinstance(spec, Bounded) and self.initialized:
            low, high = self._apply_transform(spec.low), self._apply_transform(spec.high)
            return Bounded(
                low=torch.minimum(low, high),
                high=torch.maximum(low, high),
                shape=spec.shape,
                dtype=spec.dtype,
                device=spec.device,
            )
        return spec.clone()

    def init_stats(
        self,
        num_iter: int,
        reduce_dim: int | tuple[int, ...] = 0,
        cat_dim: int | None = None,
        key: NestedKey | None = None,
        keep_dims: tuple[int, ...] | None = None,
    ) -> None:
        """Set ``loc`` and ``scale`` from random rollouts of the parent env.

        Rollouts (random actions, stopping at the first done) are collected until they
        hold at least ``num_iter`` steps; the entry ``key`` of each, shaped
        ``[*env.batch_size, time, *feature]``, is concatenated along ``cat_dim`` and its
        mean and standard deviation are taken over ``reduce_dim``. Dims count from
        the start of that shape, so on an env of batch size ``[B]``,
        ``reduce_dim=(0, 1), cat_dim=1`` gives per-feature statistics.

        Args:
            num_iter (int): the least number of steps collected.
            reduce_dim (int or tuple of int, optional): the dims the statistics are
                taken over. Defaults to ``0``.
            cat_dim (int, optional): the dim rollouts are concatenated along; it must
                be ``reduce_dim`` or one of its dims. Defaults to ``reduce_dim`` (which
                must then be an int).
            key (NestedKey, optional): the entry used. Defaults to the single in_key.
            keep_dims (tuple of int, optional): dims of ``reduce_dim`` kept with size
                one in ``loc`` and ``scale``. Defaults to ``None``.

        Raises:
            RuntimeError: if the transform has no parent env, is already initialized,
                or the statistics are not finite.
            ValueError: if ``cat_dim`` or ``keep_dims`` do not fit ``reduce_dim``, or
                ``key`` is ambiguous.

        Examples:
            >>> import torch
            >>> from rl_envs_core.testing import CountingEnv
            >>> from rl_transforms import TransformedEnv
            >>> t = ObservationNorm(standard_normal=True)
            >>> env = TransformedEnv(CountingEnv(batch_size=[3], max_steps=4), t)
            >>> t.init_stats(num_iter=24, reduce_dim=(0, 1), cat_dim=1)
            >>> t.loc, t.scale.shape
            (tensor([1.5000]), torch.Size([1]))
        """
        reduce = [reduce_dim] if isinstance(reduce_dim, int) else list(reduce_dim)
        if cat_dim is None:
            if not isinstance(reduce_dim, int):
                raise ValueError(
                    f"ObservationNorm.init_stats needs cat_dim when reduce_dim is not an int, "
                    f"got reduce_dim={reduce_dim}. Pass e.g. cat_dim={reduce[0]}."
                )
            cat_dim = reduce_dim
        if cat_dim not in reduce:
            raise ValueError(
                f"ObservationNorm.init_stats expected cat_dim to be part of reduce_dim, got "
                f"cat_dim={cat_dim}, reduce_dim={reduce_dim}."
            )
        if self.initialized:
            raise RuntimeError(
                "ObservationNorm.init_stats: loc and scale are already initialized. Build a "
                "new ObservationNorm to recompute them."
            )
        parent = self.parent
        if parent is None:
            raise RuntimeError(
                "ObservationNorm.init_stats needs the transform in an env: build "
                "TransformedEnv(env, ObservationNorm(...)) first."
            )
        if key is None:
            if len(self.in_keys) != 1:
                raise ValueError(
                    f"ObservationNorm.init_stats needs key= when there are several in_keys, "
                    f"got in_keys={self.in_keys}."
                )
            key = self.in_keys[0]
        chunks, collected = [], 0
        while collected < num_iter:
            rollout = parent.rollout(num_iter)
            collected += rollout.numel()
            chunks.append(rollout.get(key))
        data = torch.cat(chunks, cat_dim)
        ndim = data.ndim
        reduce = sorted({d % ndim for d in reduce})
        keep = sorted({d % ndim for d in keep_dims or ()})
        if not set(keep) <= set(reduce):
            raise ValueError(
                f"ObservationNorm.init_stats expected keep_dims within reduce_dim, got "
                f"keep_dims={keep_dims}, reduce_dim={reduce_dim}."
            )
        mean = data.mean(reduce, keepdim=True)
        std = data.std(reduce, keepdim=True)
        for d in reversed(reduce):
            if d not in keep:
                mean, std = mean.squeeze(d), std.squeeze(d)
        if self.standard_normal:
            loc, scale = mean, std.clamp_min(self.eps)
        else:
            scale = 1.0 / std.clamp_min(self.eps)
            loc = -mean * scale
        if not (torch.isfinite(loc).all() and torch.isfinite(scale).all()):
            raise RuntimeError(
                f"ObservationNorm.init_stats computed non-finite statistics from {key!r} "
                f"(too few samples along reduce_dim={reduce_dim}?). Increase num_iter."
            )
        self.loc, self.scale = loc, scale
        container = self.container
        if container is not None:
            container._container_changed()

    def __repr__(self) -> str:
        return (
            f"ObservationNorm(in_keys={self.in_keys}, standard_normal={self.standard_normal}, "
            f"initialized={self.initialized})"
        )


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
