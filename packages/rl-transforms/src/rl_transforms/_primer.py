"""Initial values written at reset: :class:`TensorDictPrimer` and :class:`gSDENoise`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from tensordict import NestedKey, TensorDictBase, unravel_key

from rl_specs import Composite, TensorSpec, Unbounded
from rl_transforms._base import Transform

DefaultValue = float | Callable[[], torch.Tensor] | Mapping[NestedKey, Any] | None


class TensorDictPrimer(Transform):
    """A primer for TensorDict initialization at reset time.

    Declares extra entries (e.g. recurrent states) in the observation and state specs
    and writes them at every reset: random values from the spec (``random=True``) or
    ``default_value``. During steps, an entry the env does not return is carried over
    from the step input.

    Args:
        primers (dict or Composite, optional): key -> spec. Specs without the env's
            batch dims are expanded to them. Defaults to ``None`` (use ``**kwargs``).
        random (bool, optional): draw values with ``spec.rand()``. Defaults to ``False``.
        default_value (float, callable or dict, optional): the value (or a function
            returning it, or a per-key dict of those) written at reset. Defaults to ``0``.
        reset_key (NestedKey, optional): the reset entry. Defaults to ``"_reset"``.
        expand_specs (bool, optional): expand the specs to the env's batch size.
            Defaults to ``None`` (expand when the leading dims do not match).
        single_default_value (bool, optional): accepted for compatibility. Defaults to ``False``.
        call_before_env_reset (bool, optional): accepted for compatibility. Defaults to ``False``.
        **kwargs (TensorSpec): primers given as keyword arguments.

    Raises:
        ValueError: if both ``random`` and a ``default_value`` other than ``0`` are given
            (zero, the fill used without ``random``, is accepted alongside it).
        TypeError: if a primer is not a ``TensorSpec``.

    Examples:
        >>> import torch
        >>> from rl_envs_core.testing import CountingEnv
        >>> from rl_transforms import TransformedEnv
        >>> from rl_specs import Unbounded
        >>> env = TransformedEnv(CountingEnv(batch_size=[2]), TensorDictPrimer(hidden=Unbounded(shape=(3,))))
        >>> env.reset()["hidden"].shape
        torch.Size([2, 3])
    """

    def __init__(
        self,
        primers: Mapping[NestedKey, TensorSpec] | Composite | None = None,
        random: bool | None = None,
        default_value: DefaultValue = None,
        reset_key: NestedKey | None = None,
        expand_specs: bool | None = None,
        single_default_value: bool = False,
        call_before_env_reset: bool = False,
        **kwargs: TensorSpec,
    ) -> None:
        neutral = isinstance(default_value, (int, float)) and default_value == 0
        if random and default_value is not None and not neutral:
            raise ValueError(
                "TensorDictPrimer got random=True and a default_value; they are exclusive. "
                "Pass only one of them."
            )
        items: dict[NestedKey, TensorSpec] = {}
        source = (
            primers.items(True, True) if isinstance(primers, Composite) else (primers or {}).items()
        )
        for key, spec in [*source, *kwargs.items()]:
            if not isinstance(spec, TensorSpec):
                raise TypeError(
                    f"TensorDictPrimer expected a TensorSpec for {key!r}, got "
                    f"{type(spec).__name__}. Pass e.g. hidden=Unbounded(shape=(8,))."
                )
            items[unravel_key(key)] = spec
        keys = list(items)
        super().__init__()
        self._out_keys = keys
        self.primers = items
        self.random = bool(random)
        self.default_value = default_value if default_value is not None else 0.0
        self.reset_key = reset_key if reset_key is not None else "_reset"
        self.expand_specs = expand_specs
        self.single_default_value = single_default_value
        self.call_before_env_reset = call_before_env_reset

    def _batched(self, spec: TensorSpec, batch: torch.Size) -> TensorSpec:
        if not batch or self.expand_specs is False:
            return spec.clone()
        if self.expand_specs is None and tuple(spec.shape[: len(batch)]) == tuple(batch):
            return spec.clone()
        return spec.expand(*batch, *spec.shape)

    def _specs(self) -> dict[NestedKey, TensorSpec]:
        return self._lazy.get("specs") or self.primers

    def _value(self, key: NestedKey, spec: TensorSpec, batch: torch.Size) -> torch.Tensor:
        if self.random:
            return spec.rand(batch) if batch else spec.rand()
        default = self.default_value
        if isinstance(default, Mapping):
            default = default.get(key, 0.0)
        if callable(default):
            value = torch.as_tensor(default())
        else:
            value = torch.as_tensor(default)
        zero = spec.zero(batch) if batch else spec.zero()
        return (zero + value.to(zero.device)).to(zero.dtype).expand_as(zero).clone()

    def _write(self, tensordict: TensorDictBase, only_missing: bool) -> TensorDictBase:
        batch_ndim = self._lazy.get("batch_ndim", 0)
        extra = tensordict.batch_size[: max(tensordict.batch_dims - batch_ndim, 0)]
        batch = tuple(tensordict.batch_size)
        for key, spec in self._specs().items():
            if only_missing and tensordict.get(key, None) is not None:
                continue
            # a spec that already starts with the data's batch dims is drawn as is
            lead = () if extra and tuple(spec.shape[: len(batch)]) == batch else extra
            tensordict.set(key, self._value(key, spec, torch.Size(lead)))
        return tensordict

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return self._write(tensordict_reset, only_missing=False)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        for key in self._out_keys:
            if next_tensordict.get(key, None) is None:
                value = tensordict.get(key, None)
                if value is not None:
                    next_tensordict.set(key, value)
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._write(tensordict, only_missing=True)

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        batch = output_spec.shape
        specs = {key: self._batched(spec, batch) for key, spec in self.primers.items()}
        self._lazy["specs"] = specs
        self._lazy["batch_ndim"] = len(batch)
        obs = output_spec["full_observation_spec"]
        for key, spec in specs.items():
            obs[key] = spec.clone()
        return output_spec

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        state = input_spec["full_state_spec"]
        batched = self._lazy.get("specs")  # set by transform_output_spec, already batched
        for key, spec in (batched or self.primers).items():
            state[key] = spec.clone() if batched else self._batched(spec, input_spec.shape)
        return input_spec

    def __repr__(self) -> str:
        return f"TensorDictPrimer(primers={list(self.primers)}, random={self.random})"


class gSDENoise(TensorDictPrimer):
    """A gSDE noise initializer.

    A :class:`TensorDictPrimer` writing standard-normal ``"_eps_gSDE"`` noise of shape
    ``(*shape, action_dim, state_dim)`` at every reset (the exploration noise of a
    gSDE module, kept fixed along the episode).

    Args:
        state_dim (int, optional): the state dim. Defaults to ``None`` (the noise is
            then ``(*shape, 1)`` and the module initialises it lazily).
        action_dim (int, optional): the action dim. Defaults to ``None`` (see ``state_dim``).
        shape (sequence of int, optional): leading dims. Defaults to ``()``.
        **kwargs: passed to :class:`TensorDictPrimer`.

    Raises:
        ValueError: if only one of ``state_dim`` and ``action_dim`` is given.

    Examples:
        >>> from rl_envs_core.testing import CountingEnv
        >>> from rl_transforms import TransformedEnv
        >>> env = TransformedEnv(CountingEnv(batch_size=[4]), gSDENoise(state_dim=3, action_dim=2))
        >>> env.reset()["_eps_gSDE"].shape
        torch.Size([4, 2, 3])
    """

    def __init__(
        self,
        state_dim: int | None = None,
        action_dim: int | None = None,
        shape: tuple[int, ...] | None = None,
        **kwargs: Any,  # Any: TensorDictPrimer keyword arguments
    ) -> None:
        if (state_dim is None) != (action_dim is None):
            raise ValueError(
                f"gSDENoise expected both state_dim and action_dim or neither, got "
                f"state_dim={state_dim}, action_dim={action_dim}."
            )
        shape = tuple(shape or ())
        dims = (action_dim, state_dim) if state_dim is not None else (1,)
        kwargs.setdefault("random", True)
        super().__init__(primers={"_eps_gSDE": Unbounded(shape=(*shape, *dims))}, **kwargs)
        self.state_dim = state_dim
        self.action_dim = action_dim
