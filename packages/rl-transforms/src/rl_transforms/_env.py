"""``TransformedEnv``: a base environment seen through a chain of transforms.

Specs are computed once (base specs passed through ``transform_output_spec`` /
``transform_input_spec``) and recomputed when the chain changes. A step runs the
inverse transforms (outermost first), the base env's ``step`` and the forward
transforms; a reset runs the base env's ``reset`` then every transform's ``_reset``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensordict import TensorDict, TensorDictBase

from rl_envs_core import EnvBase
from rl_envs_core.extension import get_entry as read
from rl_envs_core.extension import key_layout, register_transformed_env_factory
from rl_transforms._auto_unwrap import auto_unwrap_transformed_env
from rl_transforms._base import TDCallable, Transform
from rl_transforms._compose import Compose, as_transform
from rl_transforms._key_lists import as_tuple, set_unlocked


class TransformedEnv(EnvBase):
    """A transformed_in environment.

    Transforms join the env (at construction, ``append_transform`` or
    ``insert_transform``) in eval mode; ``env.train()`` / ``env.eval()`` switch them.

    Args:
        base_env (EnvBase): the environment to wrap.
        transform (Transform or callable, optional): the transform(s) to apply.
            Defaults to ``None`` (an empty :class:`Compose`).
        cache_specs (bool, optional): compute the transformed specs once and keep them
            until the chain changes. Defaults to ``True``.

    Keyword Args:
        auto_unwrap (bool, optional): when ``base_env`` is itself a ``TransformedEnv``,
            wrap its base env with clones of its transforms followed by ``transform``
            instead of nesting. Defaults to ``None``: the value of
            :func:`auto_unwrap_transformed_env` (``True`` unless changed with
            :class:`set_auto_unwrap_transformed_env`).
        device (torch.device, optional): move the base env there first. Defaults to
            ``None`` (the base env stays where it is).
        **kwargs: passed to :class:`EnvBase` (``allow_done_after_reset``,
            ``run_type_checks``, ``spec_locked``). The device is the base env's, as
            changed by the transforms' ``transform_env_device``.

    Raises:
        TypeError: if ``base_env`` is not an ``EnvBase``.
        ValueError: if ``transform`` already belongs to another environment.

    Examples:
        >>> from rl_envs_core.testing import CountingEnv
        >>> from rl_transforms import StepCounter, RewardSum
        >>> env = TransformedEnv(CountingEnv(max_steps=3), Compose(StepCounter(), RewardSum()))
        >>> data = env.rollout(5)
        >>> data["next", "step_count"].squeeze(-1)
        tensor([1, 2, 3])
        >>> data["next", "episode_reward"].squeeze(-1)
        tensor([1., 2., 3.])
        >>> env.transform[-1].parent.transform[0] is env.transform[0]
        False
    """

    def __init__(
        self,
        base_env: EnvBase,
        transform: Transform | TDCallable | None = None,
        cache_specs: bool = True,
        *,
        auto_unwrap: bool | None = None,
        **kwargs: Any,  # Any: EnvBase flags (bool) and device (str or torch.device)
    ) -> None:
        if not isinstance(base_env, EnvBase):
            raise TypeError(
                f"TransformedEnv expected base_env to be an EnvBase, got "
                f"{type(base_env).__name__}. Wrap your environment in an EnvBase subclass first."
            )
        device = kwargs.pop("device", None)
        if device is not None:  # TorchRL moves the base env there first
            base_env = base_env.to(device)
        transform = Compose() if transform is None else as_transform(transform)
        if auto_unwrap is None:
            auto_unwrap = auto_unwrap_transformed_env()
        if isinstance(base_env, TransformedEnv) and auto_unwrap:
            inner = [t.clone() for t in _as_list(base_env.transform)]
            transform = Compose(*inner, transform)
            base_env = base_env.base_env
        kwargs.setdefault("spec_locked", base_env.is_spec_locked)
        device = transform.transform_env_device(base_env.device)
        super().__init__(device=device, batch_size=base_env.batch_size, **kwargs)
        self.__dict__["_cache_specs"] = cache_specs
        self.base_env = base_env
        self.__dict__["_base"] = base_env
        self._set_transform(transform)

    # ------------------------------------------------------------------ transform chain
    def __setattr__(self, name: str, value: Any) -> None:  # Any: any attribute value
        if name == "transform":
            self._set_transform(value)
        else:
            super().__setattr__(name, value)

    @property
    def transform(self) -> Transform:
        """The transform (often a :class:`Compose`) applied to the base env."""
        return self.__dict__["_t"]

    def _set_transform(self, transform: Transform | TDCallable) -> None:
        transform = as_transform(transform).eval()  # transforms join an env in eval mode
        old = self.__dict__.get("_t")
        transform.set_container(self)
        if old is not None and old is not transform:
            old.reset_parent()
        self._modules["transform"] = transform
        self.__dict__["_t"] = transform
        if self.device is not None:
            transform.to(self.device)
        self._container_changed()

    def _container_changed(self) -> None:
        transform = self.__dict__["_t"]
        transform._clear_cache()
        self.__dict__["_has_inv"] = transform._has_inverse()
        self.__dict__["_inv_copy"] = transform._inv_writes_input()
        # a chain with a step-skipping transform (ConditionalSkip) may skip whole steps
        self.__dict__["_skips_steps"] = any(
            getattr(t, "_skips_whole_steps", False) for t in transform.modules()
        )
        self.__dict__["_keeps_inv_state"] = not any(
            getattr(t, "_plays_sub_steps", False) for t in transform.modules()
        )
        # entries the policy writes for an inverse transform keep the policy's value
        self.__dict__["_policy_written"] = frozenset(
            as_tuple(key)
            for t in transform.modules()
            if isinstance(t, Transform)
            for key in t._out_keys_inv
        )
        self._compute_specs()

    def _compute_specs(self) -> None:
        base = self.base_env
        transform = self.__dict__["_t"]
        output_spec = transform.transform_output_spec(set_unlocked(base.output_spec.clone()))
        input_spec = transform.transform_input_spec(set_unlocked(base.input_spec.clone()))
        self.__dict__["_output_spec"] = output_spec
        self.__dict__["_input_spec"] = input_spec
        # a transform may change the batch size (BatchSizeTransform): take the specs' shape
        self.__dict__["_batch_size"] = output_spec.shape
        self.set_spec_lock_(self.is_spec_locked)

    def _parent_of(self, child: Transform, tail: Sequence[Transform]) -> TransformedEnv:
        return TransformedEnv(self.base_env, Compose(*[t.clone() for t in tail]), auto_unwrap=False)

    def append_transform(self, transform: Transform | TDCallable) -> TransformedEnv:
        """Append ``transform`` (outermost) and return the env.

        Raises:
            ValueError: if ``transform`` already has a parent.
        """
        self._as_compose().append(as_transform(transform).eval())
        return self

    def insert_transform(self, index: int, transform: Transform | TDCallable) -> TransformedEnv:
        """Insert ``transform`` at ``index`` in the chain and return the env.

        Raises:
            ValueError: if ``transform`` already has a parent.
            IndexError: if ``index`` is out of range.
        """
        self._as_compose().insert(index, as_transform(transform).eval())
        return self

    def _as_compose(self) -> Compose:
        current = self.__dict__["_t"]
        if isinstance(current, Compose):
            return current
        current.reset_parent()
        self.__dict__["_t"] = None
        compose = Compose(current)
        self._set_transform(compose)
        return compose

    # ------------------------------------------------------------------ env API
    @property
    def batch_locked(self) -> bool:  # type: ignore[override]
        """Whether the batch size is fixed (that of the base env)."""
        return self.__dict__["_base"].batch_locked

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        transform = self.__dict__["_t"]
        state = tensordict
        # an inverse that plays sub-steps (MultiAction) hands on a later state, which the
        # next data then follows; it is not copied back into the recorded root
        plays = not self.__dict__["_keeps_inv_state"]
        if self.__dict__["_has_inv"]:
            # a shallow copy keeps the caller's data free of inverse-transformed entries
            state = transform._inv_call(
                tensordict.copy() if self.__dict__["_inv_copy"] else tensordict
            )
            # inverse-transformed entries the specs list as state (say the float action
            # an ActionDiscretizer computed) are kept in the data, as TorchRL records them;
            # an inverse that reshapes the batch (BatchSizeTransform) keeps its own layout
            keep = not plays and state.batch_size == tensordict.batch_size
            written = self.__dict__["_policy_written"]
            for key in key_layout(self)["state_keys"] if keep else ():
                if as_tuple(key) in written:
                    continue  # the policy's own value (a permuted state stays permuted)
                value = read(state, key)
                if value is not None and value is not read(tensordict, key):
                    tensordict.set(key, value)
            step_mask = read(state, "_step") if self.__dict__["_skips_steps"] else None
            if step_mask is not None and not bool(step_mask.any()):
                # every element skips this step (ConditionalSkip): neither the base env
                # nor the transforms run; the step repeats the current data
                return self._skipped_step(tensordict)
        base = self.__dict__["_base"]
        if type(base).step is EnvBase.step:  # the next data without the write + read back
            next_tensordict = base.next_of(state)
        else:
            next_tensordict = read(base.step(state), "next")
        return transform._step(state if plays else tensordict, next_tensordict)

    def _skipped_step(self, tensordict: TensorDictBase) -> TensorDictBase:
        """The next data of a skipped step: the current entries, zeros for the others."""
        output = self.output_spec
        shape = tensordict.batch_size
        extra = shape[: len(shape) - len(self.batch_size)]
        out = TensorDict(batch_size=shape, device=tensordict.device)
        for role in ("full_done_spec", "full_observation_spec", "full_reward_spec"):
            spec = output[role]
            for key in spec.keys(True, True):
                value = tensordict.get(key, None)
                if value is None:
                    leaf = spec[key]
                    value = leaf.zero(extra) if extra else leaf.zero()
                out.set(key, value)
        return out

    def _reset(
        self, tensordict: TensorDictBase | None = None, **kwargs: Any
    ) -> TensorDictBase:  # Any: backend kwargs
        base = self.__dict__["_base"]
        base_input = tensordict.copy() if tensordict is not None else None
        if (
            base_input is not None
            and base.batch_locked
            and base_input.batch_size != base.batch_size
            and base_input.batch_size.numel() == base.batch_size.numel()
        ):
            # a transform reshaped the batch (BatchSizeTransform): the base env gets its own
            base_input = base_input.reshape(base.batch_size)
        out = base.reset(base_input, **kwargs)
        if tensordict is None:
            tensordict = TensorDict(batch_size=self.batch_size, device=self.device)
        return self.__dict__["_t"]._reset(tensordict, out)

    def set_seed(self, seed: int | None = None, static_seed: bool = False) -> int | None:
        """Seed the base env; returns the next seed of the chain."""
        return self.base_env.set_seed(seed, static_seed)

    def _set_seed(self, seed: int | None) -> None:
        self.base_env.set_seed(seed, static_seed=True)

    def to(self, *args: Any, **kwargs: Any) -> TransformedEnv:  # Any: mirrors nn.Module.to
        """Move the base env and the transforms; specs are recomputed."""
        self.base_env.to(*args, **kwargs)
        super().to(*args, **kwargs)
        self._compute_specs()
        return self

    def empty_cache(self) -> None:
        """Recompute the transformed specs and forget the cached key lists."""
        self.__dict__["_t"]._clear_cache()
        self._compute_specs()

    def close(self, *, raise_if_closed: bool = True) -> None:
        """Close the base env."""
        self.base_env.close(raise_if_closed=raise_if_closed)
        self.is_closed = True

    def __getattr__(self, name: str) -> Any:  # Any: forwarded attribute of the base env
        try:
            return super().__getattr__(name)
        except AttributeError:
            base = self.__dict__.get("_modules", {}).get("base_env")
            if base is None or name.startswith("__"):
                raise
            return getattr(base, name)

    def __repr__(self) -> str:
        return f"TransformedEnv(\n    env={self.base_env!r},\n    transform={self.transform!r})"


def _as_list(transform: Transform) -> list[Transform]:
    return list(transform) if isinstance(transform, Compose) else [transform]


# EnvBase.append_transform on any env builds one of ours
register_transformed_env_factory(TransformedEnv)
