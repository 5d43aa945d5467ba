"""The :class:`Transform` base class (:class:`Compose`, the chain, is in ``_compose``).

Keys follow TorchRL's convention: ``in_keys`` / ``in_keys_inv`` name entries as the
base environment sees them, ``out_keys`` / ``out_keys_inv`` as the policy sees them.
A transform belongs to at most one container (a :class:`Compose` or a
``TransformedEnv``); :meth:`Transform.clone` gives a parentless copy that shares
the registered buffers.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
from tensordict import NestedKey, TensorDictBase
from torch import nn

from rl_envs_core.extension import get_entry as read
from rl_envs_core.extension import set_entry as write
from rl_specs import Composite, TensorSpec
from rl_transforms._key_lists import (
    KeyArg,
    check_same_length,
    key_list,
    map_leaf_specs,
    missing_key_error,
    writable,
)

TDCallable = Callable[[TensorDictBase], TensorDictBase]


class _KeyList:
    """A transform's key-list attribute, stored as ``_<name>`` and validated on assignment."""

    def __init__(self, name: str, doc: str) -> None:
        self.name, self.attr, self.__doc__ = name, f"_{name}", doc

    def __get__(self, transform: Any, owner: type | None = None) -> Any:  # Any: self on the class
        return self if transform is None else transform.__dict__[self.attr]

    def __set__(self, transform: Any, value: KeyArg) -> None:  # Any: a Transform
        owner = type(transform).__name__
        transform.__dict__[self.attr] = key_list(value, owner=owner, name=self.name)


def _in_an_env(container: Any) -> bool:  # Any: a Compose or a TransformedEnv
    """Whether ``container`` is an environment or a chain that belongs to one."""
    while isinstance(container, Transform):
        container = container.__dict__["_container"]
    return container is not None


class Transform(nn.Module):
    """Base class for environment transforms, which modify or create new data in a tensordict.

    A subclass usually implements :meth:`_apply_transform` (and
    :meth:`_inv_apply_transform` for inverse keys); transforms that need the step
    input as well as its output override :meth:`_step`, stateful ones :meth:`_reset`.
    Specs are edited through :meth:`transform_output_spec` / :meth:`transform_input_spec`
    or the leaf hooks (:meth:`transform_observation_spec`, ...).

    Args:
        in_keys (sequence of NestedKey, optional): entries read, as the base env names
            them. Defaults to ``[]``.
        out_keys (sequence of NestedKey, optional): entries written, as the policy sees
            them. Defaults to ``in_keys``.
        in_keys_inv (sequence of NestedKey, optional): entries written by the inverse
            transform, as the base env names them. Defaults to ``[]``.
        out_keys_inv (sequence of NestedKey, optional): entries read by the inverse
            transform, as the policy provides them. Defaults to ``in_keys_inv``.

    Raises:
        ValueError: if ``in_keys`` and ``out_keys`` (or their inverse pair) differ in length.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> class AddOneToObs(Transform):
        ...     def __init__(self):
        ...         super().__init__(in_keys=["observation"], out_keys=["observation"])
        ...     def _apply_transform(self, obs):
        ...         return obs + 1
        >>> AddOneToObs()(TensorDict({"observation": torch.zeros(2)}))["observation"]
        tensor([1., 1.])
        >>> class AddOneToAction(Transform):
        ...     def __init__(self):
        ...         super().__init__(in_keys=[], out_keys=[], in_keys_inv=["action"], out_keys_inv=["action"])
        ...     def _inv_apply_transform(self, action):
        ...         return action + 1
        >>> AddOneToAction().inv(TensorDict({"action": torch.zeros(2)}))["action"]
        tensor([1., 1.])
    """

    invertible: bool = False
    #: whether an all-False ``"_step"`` mask written by this transform's inverse means
    #: "skip the step": the TransformedEnv then runs neither its base env nor its
    #: transforms (ConditionalSkip); other transforms handle their masks themselves
    _skips_whole_steps: bool = False
    #: whether this transform's inverse plays steps of the env itself (MultiAction): the
    #: state it hands on is a later state, not a transformed view of the step's input,
    #: so the TransformedEnv does not copy it back into the recorded root
    _plays_sub_steps: bool = False

    def __init__(
        self,
        in_keys: KeyArg = None,
        out_keys: KeyArg = None,
        in_keys_inv: KeyArg = None,
        out_keys_inv: KeyArg = None,
    ) -> None:
        super().__init__()
        state = self.__dict__
        state["_container"] = None
        state["_missing_tolerance"] = False
        state["_lazy"] = {}
        name = type(self).__name__
        self._in_keys = key_list(in_keys, owner=name, name="in_keys")
        self._out_keys = (
            key_list(out_keys, owner=name, name="out_keys")
            if out_keys is not None
            else list(self._in_keys)
        )
        self._in_keys_inv = key_list(in_keys_inv, owner=name, name="in_keys_inv")
        self._out_keys_inv = (
            key_list(out_keys_inv, owner=name, name="out_keys_inv")
            if out_keys_inv is not None
            else list(self._in_keys_inv)
        )
        check_same_length(name, self._in_keys, self._out_keys, ("in_keys", "out_keys"))
        check_same_length(
            name, self._in_keys_inv, self._out_keys_inv, ("in_keys_inv", "out_keys_inv")
        )

    # ------------------------------------------------------------------ keys
    in_keys = _KeyList("in_keys", "Entries read by the forward transform (base-env side).")
    out_keys = _KeyList("out_keys", "Entries written by the forward transform (policy side).")
    in_keys_inv = _KeyList(
        "in_keys_inv", "Entries written by the inverse transform (base-env side)."
    )
    out_keys_inv = _KeyList("out_keys_inv", "Entries read by the inverse transform (policy side).")

    @property
    def missing_tolerance(self) -> bool:
        """Whether a missing ``in_key`` is skipped silently instead of raising."""
        return self._missing_tolerance

    def set_missing_tolerance(self, mode: bool = False) -> None:
        """Skip (``True``) or report (``False``) missing entries."""
        self.__dict__["_missing_tolerance"] = bool(mode)

    # ------------------------------------------------------------------ tensor hooks
    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        """Transform one tensor read at an ``in_key``; override in subclasses."""
        raise NotImplementedError(
            f"{type(self).__name__} has in_keys={self.in_keys} but does not implement "
            f"_apply_transform(tensor). Implement it, or override _call for tensordict-level logic."
        )

    def _inv_apply_transform(self, state: torch.Tensor) -> torch.Tensor:
        """Transform one tensor read at an ``out_key_inv``; override in subclasses."""
        raise NotImplementedError(
            f"{type(self).__name__} has in_keys_inv={self.in_keys_inv} but does not implement "
            f"_inv_apply_transform(tensor). Implement it, or override _inv_call."
        )

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        """Apply :meth:`_apply_transform` from every ``in_key`` to its ``out_key``."""
        for in_key, out_key in zip(self._in_keys, self._out_keys):
            value = read(next_tensordict, in_key)
            if value is not None:
                write(next_tensordict, out_key, self._apply_transform(value))
            elif not self._missing_tolerance:
                raise missing_key_error(type(self).__name__, in_key, next_tensordict, "in_keys")
        return next_tensordict

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Apply :meth:`_inv_apply_transform` from every ``out_key_inv`` to its ``in_key_inv``."""
        for in_key, out_key in zip(self._in_keys_inv, self._out_keys_inv):
            value = read(tensordict, out_key)
            if value is not None:
                write(tensordict, in_key, self._inv_apply_transform(value))
            elif not self._missing_tolerance:
                raise missing_key_error(type(self).__name__, out_key, tensordict, "out_keys_inv")
        return tensordict

    def _call_tolerant(self, tensordict: TensorDictBase) -> TensorDictBase:
        """:meth:`_call` with missing entries skipped."""
        previous = self._missing_tolerance
        self.__dict__["_missing_tolerance"] = True
        try:
            return self._call(tensordict)
        finally:
            self.__dict__["_missing_tolerance"] = previous

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        """Transform the output of a step; ``tensordict`` is its input. Defaults to :meth:`_call`."""
        return self._call(next_tensordict)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        """Transform the output of a reset; entries missing at reset are skipped."""
        return self._call_tolerant(tensordict_reset)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Apply the transform to a tensordict outside an env (e.g. in a replay buffer)."""
        return self._call(tensordict)

    def inv(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Apply the inverse transform to a shallow copy of ``tensordict`` and return it."""
        return self._inv_call(tensordict.copy())

    def _has_inverse(self) -> bool:
        return bool(self._in_keys_inv) or type(self)._inv_call is not Transform._inv_call

    def _inv_writes_input(self) -> bool:
        """Whether :meth:`_inv_call` may write into the tensordict it receives.

        ``TransformedEnv`` hands the inverse chain a shallow copy of the step input
        only when some inverse may write into it, so the caller's data never shows
        inverse-transformed entries. An inverse that builds a new tensordict (or
        returns its input untouched) overrides this to return ``False``.
        """
        return self._has_inverse()

    def dump(self, **kwargs: Any) -> None:  # Any: recorder options (suffix, step)
        """Write what the transform recorded; a no-op except for recorders (and ``Compose``)."""
        return None

    # ------------------------------------------------------------------ specs
    def _transform_spec(self, spec: TensorSpec) -> TensorSpec:
        """Map one ``in_key`` spec to its ``out_key`` spec. Defaults to a copy."""
        return spec.clone()

    def _transform_inv_spec(self, spec: TensorSpec) -> TensorSpec:
        """Map a base-side action/state spec to the policy-side one. Defaults to :meth:`_transform_spec`."""
        return self._transform_spec(spec)

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        """Return the observation composite as the policy sees it."""
        return map_leaf_specs(observation_spec, self._in_keys, self._out_keys, self._transform_spec)

    def transform_reward_spec(self, reward_spec: Composite) -> Composite:
        """Return the reward composite as the policy sees it."""
        return map_leaf_specs(reward_spec, self._in_keys, self._out_keys, self._transform_spec)

    def transform_done_spec(self, done_spec: Composite) -> Composite:
        """Return the done composite as the policy sees it."""
        return map_leaf_specs(done_spec, self._in_keys, self._out_keys, self._transform_spec)

    def transform_action_spec(self, action_spec: Composite) -> Composite:
        """Return the action composite the policy writes (``out_keys_inv``)."""
        return map_leaf_specs(
            action_spec,
            self._in_keys_inv,
            self._out_keys_inv,
            self._transform_inv_spec,
            drop_in=True,
        )

    def transform_state_spec(self, state_spec: Composite) -> Composite:
        """Return the state composite the policy writes (``out_keys_inv``)."""
        return map_leaf_specs(
            state_spec,
            self._in_keys_inv,
            self._out_keys_inv,
            self._transform_inv_spec,
            drop_in=True,
        )

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        """Transform ``full_observation_spec``, ``full_reward_spec`` and ``full_done_spec``.

        A locked ``output_spec`` (e.g. a base env's) is left as is: a clone is transformed.
        """
        output_spec = writable(output_spec)
        output_spec["full_observation_spec"] = self.transform_observation_spec(
            output_spec["full_observation_spec"]
        )
        output_spec["full_reward_spec"] = self.transform_reward_spec(
            output_spec["full_reward_spec"]
        )
        output_spec["full_done_spec"] = self.transform_done_spec(output_spec["full_done_spec"])
        return output_spec

    def transform_env_device(self, device: torch.device | None) -> torch.device | None:
        """The device of the env seen through this transform (``device`` unchanged by default)."""
        return device

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        """Transform ``full_action_spec`` and ``full_state_spec``.

        Entries the transform reads back from the step input (registered by
        :meth:`_carry_as_state` while transforming the output spec) are declared as
        states, so that batched envs forward them to their workers. A locked
        ``input_spec`` is left as is: a clone is transformed.
        """
        input_spec = writable(input_spec)
        input_spec["full_action_spec"] = self.transform_action_spec(input_spec["full_action_spec"])
        state_spec = self.transform_state_spec(input_spec["full_state_spec"])
        carried = self._lazy.get("carried", {})
        if state_spec is None and carried:
            state_spec = Composite(shape=input_spec.shape, device=input_spec.device)
        for key, spec in carried.items():
            state_spec[key] = spec.clone()
        input_spec["full_state_spec"] = state_spec
        return input_spec

    def _carry_as_state(self, spec: Composite, keys: list[NestedKey]) -> None:
        """Declare ``keys`` of ``spec`` (an output composite) as states of the env."""
        self._lazy["carried"] = {key: spec[key] for key in keys if spec.get(key) is not None}

    # ------------------------------------------------------------------ parenthood
    @property
    def container(self) -> Any:  # Any: a Compose or a TransformedEnv (defined downstream)
        """The object holding this transform (a ``Compose`` or a ``TransformedEnv``), or ``None``."""
        return self.__dict__["_container"]

    @property
    def parent(self) -> Any:  # Any: a TransformedEnv, built by the container
        """The base env with every transform before this one, as a new ``TransformedEnv``.

        ``None`` when the transform is not attached to an environment.
        """
        container = self.__dict__["_container"]
        if container is None:
            return None
        return container._parent_of(self, ())

    def set_container(self, container: Any) -> None:  # Any: a Compose or a TransformedEnv
        """Register ``container`` as the holder of this transform.

        A transform held by a ``Compose`` that belongs to no environment (a cloned
        chain, say) may move to another container.

        Raises:
            ValueError: if the transform already belongs to another container that is
                part of an environment.
        """
        current = self.__dict__["_container"]
        if current is not None and current is not container and _in_an_env(current):
            raise ValueError(
                f"{type(self).__name__} already belongs to a {type(current).__name__}; a "
                f"transform has a single parent. Attach a parentless copy instead: "
                f"transform.clone()."
            )
        self.__dict__["_container"] = container
        self._clear_cache()

    def reset_parent(self) -> None:
        """Detach the transform from its container."""
        self.__dict__["_container"] = None
        self._clear_cache()

    def _clear_cache(self) -> None:
        """Forget everything derived from the parent env (keys, specs)."""
        self.__dict__["_lazy"] = {}

    def _container_changed(self) -> None:
        """Called by a container when the chain around this transform changed."""
        self._clear_cache()

    def _shared_on_clone(self) -> tuple[Any, ...]:  # Any: whatever state a subclass shares
        """Objects that :meth:`clone` shares instead of copying (besides buffers and parameters)."""
        return ()

    def clone(self) -> Transform:
        """A parentless deep copy that shares this transform's buffers and parameters."""
        state = self.__dict__
        container = state["_container"]
        transforms = [m for m in self.modules() if isinstance(m, Transform)]
        caches = [t.__dict__["_lazy"] for t in transforms]
        state["_container"] = None
        for t in transforms:  # caches may hold the parent env: never copy them
            t.__dict__["_lazy"] = {}
        try:
            memo: dict[int, Any] = {id(t): t for t in (*self.buffers(), *self.parameters())}
            for t in transforms:
                memo.update((id(obj), obj) for obj in t._shared_on_clone())
            out = copy.deepcopy(self, memo)
        finally:
            state["_container"] = container
            for t, cache in zip(transforms, caches):
                t.__dict__["_lazy"] = cache
        out._clear_cache()
        return out

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(in_keys={self.in_keys}, out_keys={self.out_keys}, "
            f"in_keys_inv={self.in_keys_inv}, out_keys_inv={self.out_keys_inv})"
        )


class ObservationTransform(Transform):
    """Abstract class for transformations of the observations.

    A :class:`Transform` whose ``in_keys`` default to the usual observation entries
    (``"observation"``, ``"pixels"``, ``"observation_vector"``) and whose missing
    entries are skipped, since an env rarely has all of them.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> class Negate(ObservationTransform):
        ...     def _apply_transform(self, obs):
        ...         return -obs
        >>> Negate()(TensorDict({"observation": torch.ones(1)}))["observation"]
        tensor([-1.])
    """

    def __init__(
        self,
        in_keys: KeyArg = None,
        out_keys: KeyArg = None,
        in_keys_inv: KeyArg = None,
        out_keys_inv: KeyArg = None,
    ) -> None:
        if in_keys is None:
            in_keys = ["observation", "pixels", "observation_vector"]
            out_keys = None
        super().__init__(in_keys, out_keys, in_keys_inv, out_keys_inv)
        self.__dict__["_missing_tolerance"] = True
