"""``EnvBase``: the abstract environment, its specs, reset, step and seeding.

Rollouts live in ``_rollout.py``, partial steps/resets in ``_partial.py`` and the
spec accessors in ``_spec_views.py``; the methods here delegate to them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import NestedKey, TensorDict, TensorDictBase
from torch import nn

from rl_envs_core import _check, _done, _partial, _rollout, _spec_views, _validation
from rl_envs_core._auto_reset import AutoResetHandler, make_auto_reset_handler
from rl_envs_core._spec_lock import lock_specs_after
from rl_envs_core._step_mdp import advance, as_tuple
from rl_envs_core._td import get_entry, has_entries, set_child, set_entry, to_device
from rl_envs_core._transform_hook import make_transformed_env
from rl_specs import Categorical, Composite, TensorSpec, Unbounded

DeviceType = torch.device | str | int | None


def _to_device(device: DeviceType) -> torch.device | None:
    if device is None:
        return None
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def _next_seed(seed: int) -> int:
    generator = torch.Generator().manual_seed(int(seed) % (2**63))
    return int(torch.randint(0, 2**32 - 1, (), generator=generator))


def _key_list(name: str, doc: str) -> property:
    """A read-only property returning a copy of one cached key list."""
    return property(lambda self: list(self._key_cache()[name]), doc=doc)


class EnvBase(nn.Module):
    """Abstract environment parent class.

    A subclass sets its specs in ``__init__`` (``observation_spec``, ``action_spec``,
    ``reward_spec``, ``done_spec``, ``state_spec`` or their ``full_*`` forms, with
    the batch size as leading dims) and implements ``_reset``, ``_step`` (returning
    the content of ``"next"``) and ``_set_seed``.

    Args:
        device (torch.device, optional): where input and output data live.
            Defaults to ``None`` (no casting).
        batch_size (torch.Size or sequence of int, optional): the number of envs
            batched together. Defaults to ``torch.Size([])``.
        run_type_checks (bool, optional): check the actions against their spec at
            every step. Defaults to ``False``.
        allow_done_after_reset (bool, optional): accept a ``True`` done right after
            a reset. Defaults to ``False``.
        spec_locked (bool, optional): lock the specs against in-place edits once the
            subclass constructor returns (specs may be assigned before
            ``super().__init__()`` and edited in place until then). Defaults to ``True``.
        auto_reset (bool, optional): the env resets itself when done; observations
            delivered with a done flag belong to the next episode. Defaults to ``False``.
        auto_reset_replace (bool, optional): with ``auto_reset``, replace those
            observations in ``"next"`` by a placeholder (``nan``). Defaults to ``True``.

    Examples:
        >>> from rl_envs_core.testing import CountingEnv
        >>> env = CountingEnv(max_steps=3, batch_size=[2])
        >>> data = env.rollout(10)
        >>> data.batch_size, data.names
        (torch.Size([2, 3]), [None, 'time'])
        >>> data["next", "done"][:, -1].squeeze(-1)
        tensor([True, True])
    """

    batch_locked: bool = True

    def __init__(
        self,
        *,
        device: DeviceType = None,
        batch_size: torch.Size | Sequence[int] | int | None = None,
        run_type_checks: bool = False,
        allow_done_after_reset: bool = False,
        spec_locked: bool = True,
        auto_reset: bool = False,
        auto_reset_replace: bool = True,
    ) -> None:
        super().__init__()
        if batch_size is None:
            batch_size = torch.Size([])
        elif isinstance(batch_size, int):
            batch_size = torch.Size([batch_size])
        state = self.__dict__
        state["_batch_size"] = torch.Size(batch_size)
        state["_device"] = _to_device(device)
        # the specs lock when the outermost constructor returns (see __init_subclass__),
        # so a subclass can still edit them in place in its own __init__
        constructing = state.get("_init_depth", 0) > 0
        state["_spec_locked"] = bool(spec_locked) and not constructing
        state["_spec_lock_wanted"] = bool(spec_locked)
        state["_cache"] = None
        state["_io_checked"] = False
        self.run_type_checks = run_type_checks
        self.allow_done_after_reset = allow_done_after_reset
        self.auto_reset = auto_reset
        self.auto_reset_replace = auto_reset_replace
        state["_auto_reset_handler"] = (
            make_auto_reset_handler(auto_reset_replace) if auto_reset else None
        )
        self.is_closed = False
        shape = self._batch_size
        state["_output_spec"] = Composite(
            full_observation_spec=Composite(shape=shape),
            full_reward_spec=Composite(reward=Unbounded(shape=(*shape, 1)), shape=shape),
            full_done_spec=Composite(
                **{
                    name: Categorical(2, shape=(*shape, 1), dtype=torch.bool)
                    for name in ("done", "terminated")
                },
                shape=shape,
            ),
            shape=shape,
        )
        state["_input_spec"] = Composite(
            full_action_spec=Composite(shape=shape),
            full_state_spec=Composite(shape=shape),
            shape=shape,
        )
        if self._device is not None:
            state["_output_spec"] = self._output_spec.to(self._device)
            state["_input_spec"] = self._input_spec.to(self._device)
        for view, value in state.pop("_pending_specs", ()):
            view.__set__(self, value)  # specs a subclass assigned before super().__init__()
        self.set_spec_lock_(self._spec_locked)

    def __init_subclass__(cls, **kwargs: Any) -> None:  # Any: forwarded class keywords
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is not None:
            cls.__init__ = lock_specs_after(init)

    # ------------------------------------------------------------------ attributes
    @property
    def batch_size(self) -> torch.Size:
        """The number of envs batched together (leading dims of every spec)."""
        return self._batch_size

    @property
    def shape(self) -> torch.Size:
        """The env's batch size (as ``tensordict.shape`` is a tensordict's)."""
        return self._batch_size

    @property
    def device(self) -> torch.device | None:
        """Where the input and output tensordicts are expected to live."""
        return self._device

    @property
    def is_spec_locked(self) -> bool:
        """Whether the specs are locked against in-place edits."""
        return self._spec_locked

    @property
    def auto_reset_handler(self) -> AutoResetHandler | None:
        """The handler of an auto-resetting env (``None`` otherwise)."""
        return self._auto_reset_handler

    def set_spec_lock_(self, mode: bool = True) -> EnvBase:
        """Lock (``mode=True``) or unlock the specs in place; returns the env.

        Examples:
            >>> from rl_envs_core.testing import CountingEnv
            >>> env = CountingEnv()
            >>> env.set_spec_lock_(False).is_spec_locked
            False
        """
        self.__dict__["_spec_locked"] = bool(mode)
        for parent in (self._output_spec, self._input_spec):
            _spec_views.set_locked(parent, bool(mode))
        self._invalidate_cache()
        return self

    @property
    def specs(self) -> Composite:
        """All specs: ``Composite(output_spec=..., input_spec=...)``."""
        return Composite(
            output_spec=self._output_spec, input_spec=self._input_spec, shape=self.batch_size
        )

    def _invalidate_cache(self) -> None:
        self.__dict__["_cache"] = None
        self.__dict__["_io_checked"] = False

    def _key_cache(self) -> dict[str, Any]:  # Any: heterogeneous cache values
        cache = self.__dict__["_cache"]
        if cache is None:
            cache = self.__dict__["_cache"] = _spec_views.compute_key_cache(self)
        return cache

    def _done_leaf_specs(self) -> list[tuple[NestedKey, TensorSpec]]:
        return self._key_cache()["done_leaves"]

    def _single_key(self, role: str) -> NestedKey:
        keys = self._key_cache()[f"{role}_keys"]
        if len(keys) != 1:
            raise KeyError(
                f"{role}_key needs exactly one {role} entry, the env has {len(keys)}: "
                f"{[str(k) for k in keys]}. Use env.{role}_keys instead."
            )
        return keys[0]

    action_keys = _key_list("action_keys", "Leaf keys of full_action_spec.")
    reward_keys = _key_list("reward_keys", "Leaf keys of full_reward_spec.")
    done_keys = _key_list("done_keys", "Leaf keys of full_done_spec (root level first).")
    state_keys = _key_list("state_keys", "Leaf keys of full_state_spec.")
    observation_keys = _key_list("observation_keys", "Leaf keys of full_observation_spec.")
    reset_keys = _key_list("reset_keys", "One '_reset' key per done level.")
    action_key = property(
        lambda self: self._single_key("action"), doc="The action key (one action only)."
    )
    reward_key = property(
        lambda self: self._single_key("reward"), doc="The reward key (one reward only)."
    )
    done_key = property(lambda self: self._key_cache()["done_keys"][0], doc="The first done key.")
    done_keys_groups = property(
        lambda self: [list(v) for v in self._key_cache()["done_levels"].values()],
        doc="Done keys grouped by nesting level.",
    )

    # ------------------------------------------------------------------ abstract API
    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Compute the next step; return the content of ``"next"`` (not nested)."""
        raise NotImplementedError(f"{type(self).__name__} must implement _step(tensordict).")

    def _reset(
        self, tensordict: TensorDictBase | None, **kwargs: Any
    ) -> TensorDictBase:  # Any: backend kwargs
        """Reset the env (where ``"_reset"`` says so) and return the first observation."""
        raise NotImplementedError(f"{type(self).__name__} must implement _reset(tensordict).")

    def _set_seed(self, seed: int | None) -> None:
        """Seed the env's random number generators."""
        raise NotImplementedError(f"{type(self).__name__} must implement _set_seed(seed).")

    # ------------------------------------------------------------------ step
    def step(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Run one step: read the action in ``tensordict``, write the result under ``"next"``.

        A ``"_step"`` boolean mask restricts the step to some elements; the others
        keep the previous values of ``tensordict`` (or zeros).

        Raises:
            KeyError: an action is missing, or ``_step`` returned undeclared keys.
            ValueError: an action or output entry has the wrong shape.

        Examples:
            >>> from rl_envs_core.testing import CountingEnv
            >>> env = CountingEnv()
            >>> data = env.step(env.rand_action(env.reset()))
            >>> data["next", "observation"]
            tensor([1.])
        """
        set_child(tensordict, "next", self.next_of(tensordict))
        return tensordict

    def next_of(self, tensordict: TensorDictBase) -> TensorDictBase:
        """What :meth:`step` writes under ``"next"``, returned without writing it.

        Wrappers that only need the next data (``TransformedEnv`` stepping its base
        env) call this instead of ``step`` and save the write and the read back.
        Subclasses that override ``step`` must be stepped through ``step``.

        Examples:
            >>> from rl_envs_core.testing import CountingEnv
            >>> env = CountingEnv()
            >>> data = env.rand_action(env.reset())
            >>> env.next_of(data)["observation"], "next" in data.keys()
            (tensor([1.]), False)
        """
        state = self.__dict__  # one attribute lookup (nn.Module's are slow), then dict reads
        if not state["_io_checked"] or state["run_type_checks"]:
            _validation.check_step_input(self, tensordict)
        partial = get_entry(tensordict, "_step")
        if partial is not None and not bool(partial.all()):
            return _partial.partial_step(self, tensordict, partial)
        return EnvBase._step_and_complete(self, tensordict)  # from the class: no bound method

    def _step_and_complete(self, tensordict: TensorDictBase) -> TensorDictBase:
        try:
            out = self._step(tensordict)
        except (KeyError, ValueError, RuntimeError, IndexError, TypeError) as err:
            _validation.check_step_input(self, tensordict, cause=err)
            raise
        state = self.__dict__  # one attribute lookup (nn.Module's are slow), then dict reads
        names = (state["_cache"] or self._key_cache())["done_names"]
        if names is None or not has_entries(out, names):  # checked here: one call per step
            _done.complete_done(self, out, fill_zeros=True)  # a missing done entry: "not done"
        device = state["_device"]
        if device is not None and out.device != device:
            out = to_device(out, device)
        if not state["_io_checked"]:
            # done flags returned in another shape (a scalar False for a (1,) spec) are
            # reshaped on every step once the first one needed it
            state["_fit_done"] = _validation.fit_done_shapes(self, out)
            _validation.check_step_output(self, tensordict, out)
            state["_io_checked"] = True
        elif state.get("_fit_done"):
            _validation.fit_done_shapes(self, out)
        handler = state["_auto_reset_handler"]
        if handler is not None:
            out = handler.on_step(self, out)
        return out

    def _step_mdp(self, tensordict: TensorDictBase) -> TensorDictBase:
        cache = self.__dict__["_cache"] or self._key_cache()  # once per step: no call when built
        return advance(
            tensordict, root_excluded=cache["root_excluded"], next_excluded=cache["reward_excluded"]
        )

    def step_and_maybe_reset(
        self, tensordict: TensorDictBase
    ) -> tuple[TensorDictBase, TensorDictBase]:
        """Step, then (partially) reset where done; return the step data and the next input.

        Examples:
            >>> from rl_envs_core.testing import CountingEnv
            >>> env = CountingEnv(max_steps=1)
            >>> data, data_ = env.step_and_maybe_reset(env.rand_action(env.reset()))
            >>> data["next", "done"].item(), data_["done"].item(), data_["observation"].item()
            (True, False, 0.0)
        """
        return _rollout.step_and_maybe_reset(self, tensordict)

    def maybe_reset(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Reset (partially) the elements of ``tensordict`` whose done flags are set.

        Examples:
            >>> import torch
            >>> from rl_envs_core.testing import CountingEnv
            >>> env = CountingEnv(batch_size=[2])
            >>> data = env.reset()
            >>> data["done"] = torch.tensor([[True], [False]])
            >>> env.maybe_reset(data)["done"].squeeze(-1)
            tensor([False, False])
        """
        return _rollout.maybe_reset(self, tensordict)

    def add_truncated_keys(self) -> EnvBase:
        """Add a ``"truncated"`` entry next to every ``"done"`` that lacks one; returns the env.

        Examples:
            >>> from rl_envs_core.testing import CountingEnv
            >>> env = CountingEnv()
            >>> env.full_done_spec = env.full_done_spec.exclude("truncated")
            >>> env.add_truncated_keys().done_keys
            ['done', 'terminated', 'truncated']
        """
        spec = self.full_done_spec.clone()
        _spec_views.set_locked(spec, False)
        for level, keys in self._key_cache()["done_levels"].items():
            names = {as_tuple(key)[-1]: key for key in keys}
            if "truncated" not in names and "done" in names:
                spec[(*level, "truncated")] = spec[names["done"]].clone()
        self.full_done_spec = spec
        return self

    def check_env_specs(self, *args: Any, **kwargs: Any) -> None:  # Any: see check_env_specs
        """Run :func:`check_env_specs` on this env."""
        _check.check_env_specs(self, *args, **kwargs)

    def rand_action(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """Write a random action (drawn from ``action_spec``) in ``tensordict``.

        Examples:
            >>> from rl_envs_core.testing import CountingEnv
            >>> CountingEnv(batch_size=[3]).rand_action()["action"].shape
            torch.Size([3, 1])
        """
        if tensordict is None:
            tensordict = TensorDict(batch_size=self.batch_size, device=self.device)
        extra = None
        if not self.batch_locked and tensordict.batch_dims > len(self.batch_size):
            extra = tensordict.batch_size[: tensordict.batch_dims - len(self.batch_size)]
        cache = self.__dict__["_cache"] or self._key_cache()  # once per step: no call when built
        if not cache["action_leafwise"]:  # a lazy stack of members with their own classes
            sample = self.full_action_spec.rand(extra)
            return sample if not tensordict.keys() else tensordict.update(sample)
        for key, leaf in cache["action_leaves"]:
            set_entry(tensordict, key, leaf.rand(extra) if extra is not None else leaf.rand())
        return tensordict

    def rand_step(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """Step with a random action."""
        return self.step(self.rand_action(tensordict))

    # ------------------------------------------------------------------ reset
    def reset(
        self,
        tensordict: TensorDictBase | None = None,
        **kwargs: Any,  # Any: backend kwargs
    ) -> TensorDictBase:
        """Reset the env (partially when ``"_reset"`` entries are given) and return the first data.

        Where a ``"_reset"`` mask is ``False``, the values of ``tensordict`` are kept;
        those results are written back into ``tensordict`` and the ``"_reset"``
        entries removed.

        Raises:
            RuntimeError: a done flag is ``True`` after the reset and
                ``allow_done_after_reset`` is ``False``.

        Examples:
            >>> from rl_envs_core.testing import CountingEnv
            >>> sorted(CountingEnv().reset().keys())
            ['done', 'observation', 'terminated']
        """
        resets = (
            _partial.collect_resets(tensordict, self._key_cache()["reset_keys"])
            if tensordict is not None
            else {}
        )
        out = None
        handler = self._auto_reset_handler
        if handler is not None:
            out = handler.on_reset(self, tensordict if resets else None)
        if out is None:
            out = self._reset(tensordict, **kwargs)
        if out is tensordict:
            out = out.copy()
        if self._device is not None and out.device != self._device:
            out = to_device(out, self._device)
        zeros = _done.complete_done(self, out, fill_zeros=True)
        if resets:
            # every element reset (e.g. an unbatched env at each episode end): the
            # fresh values are the result, no masking needed
            masked = not all(bool(mask.all()) for mask in resets.values())
            if masked:
                _partial.merge_masked(out, tensordict, resets, zeros_when_missing=False)
            _partial.remove_resets(out, resets)
            _partial.remove_resets(tensordict, resets)
            tensordict.update(out)
        if not self.allow_done_after_reset:
            _done.check_not_done(self, out, resets, skip=zeros)
        return out

    # ------------------------------------------------------------------ seeding, misc
    def append_transform(self, transform: Callable[[TensorDictBase], TensorDictBase]) -> EnvBase:
        """Return a ``TransformedEnv`` of this env and ``transform`` (needs rl-transforms).

        Raises:
            ImportError: if rl-transforms, which provides ``TransformedEnv``, is not installed.
        """
        return make_transformed_env(self, transform)

    def set_seed(self, seed: int | None = None, static_seed: bool = False) -> int | None:
        """Seed the env and return the next seed of a deterministic chain.

        Examples:
            >>> from rl_envs_core.testing import CountingEnv
            >>> env = CountingEnv()
            >>> env.set_seed(0) == CountingEnv().set_seed(0) != 0
            True
        """
        self._set_seed(seed)
        if seed is not None and not static_seed:
            return _next_seed(seed)
        return seed

    def rollout(
        self,
        max_steps: int,
        policy: Callable[[TensorDictBase], TensorDictBase] | None = None,
        callback: Callable[[EnvBase, TensorDictBase], Any] | None = None,  # Any: ignored result
        *,
        auto_reset: bool = True,
        auto_cast_to_device: bool = False,
        break_when_any_done: bool | None = None,
        break_when_all_done: bool | None = None,
        return_contiguous: bool | None = None,
        tensordict: TensorDictBase | None = None,
        set_truncated: bool = False,
        out: TensorDictBase | None = None,
        trust_policy: bool = False,
    ) -> TensorDictBase:
        """Run up to ``max_steps`` steps and stack them along a trailing ``"time"`` dim.

        Args:
            max_steps (int): the maximum number of steps.
            policy (callable, optional): reads the root and writes the action.
                Defaults to ``None`` (random actions).
            callback (callable, optional): called as ``callback(env, data)`` after
                each step. Defaults to ``None``.
            auto_reset (bool, optional): reset the env first. Defaults to ``True``.
            auto_cast_to_device (bool, optional): move data to the policy's device
                and back. Defaults to ``False``.
            break_when_any_done (bool, optional): stop at the first done. Defaults to
                ``True`` unless ``break_when_all_done`` is set.
            break_when_all_done (bool, optional): keep stepping the envs that are not
                done (partial steps) until all are. Defaults to ``False``.
            return_contiguous (bool, optional): stack into one contiguous tensordict;
                ``False`` gives a lazy stack. Defaults to ``None``: contiguous unless
                a spec has a dynamic (-1) dim. ``True`` on an env with dynamic specs
                raises ``RuntimeError`` when the shapes differ between steps.
                Contiguous results are stacked by chunks of steps as the rollout runs,
                so a step's tensors must not be edited in place after the next
                few dozen steps.
            tensordict (TensorDictBase, optional): the first input (given to
                ``reset`` when ``auto_reset``). Defaults to ``None``.
            set_truncated (bool, optional): mark the last step truncated. Defaults
                to ``False``.
            out (TensorDictBase, optional): a tensordict the result is written into.
                Defaults to ``None``.
            trust_policy (bool, optional): skip the device check of the policy.
                Defaults to ``False``.

        Raises:
            ValueError: incompatible options (both break flags ``True``; no
                ``tensordict`` with ``auto_reset=False``).
            RuntimeError: ``set_truncated`` on an env without a ``"truncated"`` entry.

        Examples:
            >>> from rl_envs_core.testing import CountingEnv
            >>> env = CountingEnv(max_steps=2)
            >>> data = env.rollout(4, break_when_any_done=False)
            >>> data["observation"].squeeze(-1), data["next", "done"].squeeze(-1)
            (tensor([0., 1., 0., 1.]), tensor([False,  True, False,  True]))
            >>> env = env.add_truncated_keys()  # set_truncated needs a "truncated" entry
            >>> env.rollout(4, set_truncated=True)["next", "truncated"].squeeze(-1)
            tensor([False,  True])
        """
        return _rollout.rollout(
            self,
            max_steps,
            policy,
            callback,
            auto_reset=auto_reset,
            auto_cast_to_device=auto_cast_to_device,
            break_when_any_done=break_when_any_done,
            break_when_all_done=break_when_all_done,
            return_contiguous=return_contiguous,
            tensordict=tensordict,
            set_truncated=set_truncated,
            out=out,
            trust_policy=trust_policy,
        )

    def fake_tensordict(self) -> TensorDictBase:
        """A zero-filled TED tensordict with every entry the specs declare."""
        root = self._input_spec["full_state_spec"].zero()
        root.update(self._input_spec["full_action_spec"].zero())
        root.update(self._output_spec["full_observation_spec"].zero())
        root.update(self._output_spec["full_done_spec"].zero())
        nxt = self._output_spec["full_observation_spec"].zero()
        nxt.update(self._output_spec["full_reward_spec"].zero())
        nxt.update(self._output_spec["full_done_spec"].zero())
        root.set("next", nxt)
        return root

    def to(self, *args: Any, **kwargs: Any) -> EnvBase:  # Any: mirrors nn.Module.to
        """Move the env (its specs and module parameters) to a device."""
        device, *_ = torch._C._nn._parse_to(*args, **kwargs)
        super().to(*args, **kwargs)
        if device is not None:
            device = _to_device(device)
            self.__dict__["_device"] = device
            self.__dict__["_output_spec"] = self._output_spec.to(device)
            self.__dict__["_input_spec"] = self._input_spec.to(device)
            self.set_spec_lock_(self._spec_locked)
        return self

    def empty_cache(self) -> None:
        """Forget the cached key lists (recomputed on next use)."""
        self._invalidate_cache()

    def close(self, *, raise_if_closed: bool = True) -> None:
        """Release the env's resources.

        Args:
            raise_if_closed (bool, optional): accepted for TorchRL compatibility; closing
                a plain env twice is harmless. Defaults to ``True``.
        """
        self.is_closed = True

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(batch_size={tuple(self.batch_size)}, device={self.device}, "
            f"observation_keys={[str(k) for k in self.observation_keys]}, "
            f"action_keys={[str(k) for k in self.action_keys]})"
        )


for _name, _view in _spec_views.spec_views().items():
    setattr(EnvBase, _name, _view)
del _name, _view
