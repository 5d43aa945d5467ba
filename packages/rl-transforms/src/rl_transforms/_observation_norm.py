""":class:`ObservationNorm`: a fixed affine normalisation of observations (loc, scale),
with statistics computed from an env's rollouts by :meth:`ObservationNorm.init_stats`."""

from __future__ import annotations

import torch
from tensordict import NestedKey

from rl_specs import Bounded, TensorSpec
from rl_transforms._base import Transform
from rl_transforms._key_lists import KeyArg


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
