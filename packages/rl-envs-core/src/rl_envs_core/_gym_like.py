"""``GymLikeEnv``: the plumbing shared by adapters of gym-like backends.

A backend object with ``reset()`` and ``step(action)`` is wrapped; the ``read_*``
methods turn its outputs into tensors, and ``_output_transform`` /
``_reset_output_transform`` normalise its result tuples. Adapters (in
``rl-env-adapters``) subclass it and implement ``_make_specs`` (and usually
``_build_env``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from rl_envs_core._env_base import DeviceType, EnvBase
from rl_envs_core._td import get_entry
from rl_specs import TensorSpec

# Any in this module: backend objects, observations and infos are library-defined.
InfoReader = Callable[[Any, TensorDictBase], Any]


def encode_value(value: Any, spec: TensorSpec | None, batch_size: torch.Size) -> torch.Tensor:
    """Convert a backend value (numpy, python scalar, tensor) to a tensor for ``spec``."""
    if not isinstance(value, torch.Tensor):
        value = torch.as_tensor(value)
    if spec is None:
        return value if value.shape[: len(batch_size)] == batch_size else value.expand(batch_size)
    if value.dtype != spec.dtype:
        value = value.to(spec.dtype)
    if spec.device is not None and value.device != spec.device:
        value = value.to(spec.device)
    if value.shape != spec.shape and value.numel() == spec.shape.numel():
        value = value.reshape(spec.shape)
    return value


@dataclass(frozen=True)
class _ReadPlan:
    """What the readers look up in the specs: the answers for one version of the specs."""

    keys: dict  # the env's key cache these answers were read with (identity marks the version)
    observation: dict[str, TensorSpec]  # top-level observation entries
    reward: TensorSpec | None  # of the only reward entry; None when there is not exactly one
    done: list[tuple[str, TensorSpec]]  # the terminated / truncated / done entries present
    action_key: Any  # NestedKey of the only action entry; None when there is not exactly one

    @classmethod
    def of(cls, env: EnvBase, keys: dict) -> _ReadPlan:
        obs, done = env.full_observation_spec, env.full_done_spec
        names = set(done.keys())
        action_keys, reward_keys = env.action_keys, env.reward_keys
        return cls(
            keys=keys,
            observation={key: obs[key] for key in obs.keys()},
            reward=env.full_reward_spec[reward_keys[0]] if len(reward_keys) == 1 else None,
            done=[(n, done[n]) for n in ("terminated", "truncated", "done") if n in names],
            action_key=action_keys[0] if len(action_keys) == 1 else None,
        )


class GymLikeEnv(EnvBase):
    """A gym-like env is an environment.

    Its behaviour is similar to gym environments in what common methods (specifically
    reset and step) are expected to do: ``reset`` returns ``(observation, info)`` and
    ``step`` returns ``(observation, reward, terminated, truncated, info)``.

    A step follows one template, which adapters fill rather than replace: select the
    action (``_select_action``) and convert it (``read_action``), step the backend
    ``frame_skip`` times, normalising each result once (``_output_transform``: the 5-
    and the legacy 4-value forms), read the result (``_read_step``: ``read_obs``,
    ``read_reward``, ``read_done``), build the output (``_build_output``) and let the
    info readers add to it (``read_info``).

    Args:
        env (object, optional): the backend env to wrap. Defaults to ``None``: the
            env is built by ``_build_env(**kwargs)``.
        frame_skip (int, optional): repeat each action this many times, summing the
            rewards. Defaults to ``1``.
        convert_actions_to_numpy (bool, optional): give the backend numpy actions.
            Defaults to ``True``.
        device, batch_size, allow_done_after_reset, spec_locked, auto_reset,
        auto_reset_replace: as in :class:`EnvBase`.
        **kwargs: passed to ``_check_kwargs`` and ``_build_env``.

    Raises:
        TypeError: if no backend is given and the subclass does not build one.

    Examples:
        >>> import numpy as np  # the backend's own dependency, not this package's
        >>> from rl_specs import Bounded, Composite, Unbounded
        >>> class Backend:
        ...     def reset(self, seed=None):
        ...         self.x = 0.0
        ...         return np.array([self.x], dtype=np.float32), {}
        ...     def step(self, action):
        ...         self.x += float(action[0])
        ...         return np.array([self.x], dtype=np.float32), 1.0, self.x > 1, False, {}
        >>> class Wrapper(GymLikeEnv):
        ...     def _make_specs(self, env):
        ...         self.observation_spec = Composite(observation=Unbounded(shape=(1,)))
        ...         self.action_spec = Bounded(low=0.0, high=1.0, shape=(1,))
        >>> env = Wrapper(env=Backend())
        >>> data = env.rollout(5, policy=lambda td: td.set("action", torch.ones(1)))
        >>> data["next", "observation"].squeeze(-1), data["next", "done"].squeeze(-1)
        (tensor([1., 2.]), tensor([False,  True]))
    """

    def __init__(
        self,
        *args: Any,
        device: DeviceType = None,
        batch_size: torch.Size | None = None,
        allow_done_after_reset: bool = False,
        spec_locked: bool = True,
        auto_reset: bool = False,
        auto_reset_replace: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            device=device,
            batch_size=batch_size,
            allow_done_after_reset=allow_done_after_reset,
            spec_locked=spec_locked,
            auto_reset=auto_reset,
            auto_reset_replace=auto_reset_replace,
        )
        self._info_dict_reader: list[InfoReader] = []
        self.wrapper_frame_skip = int(kwargs.pop("frame_skip", 1))
        self._convert_actions_to_numpy = bool(kwargs.pop("convert_actions_to_numpy", True))
        self._constructor_kwargs = dict(kwargs)
        self._check_kwargs(kwargs)
        env = kwargs.pop("env", None)
        self.__dict__["_env"] = env if env is not None else self._build_env(*args, **kwargs)
        self._make_specs(self._env)
        self._init_env()

    # ---------------------------------------------------------------- subclass hooks
    def _check_kwargs(self, kwargs: dict[str, Any]) -> None:
        """Validate the constructor kwargs (no check by default)."""

    def _build_env(self, *args: Any, **kwargs: Any) -> Any:
        """Build the backend env from the constructor arguments."""
        raise TypeError(
            f"{type(self).__name__} needs a backend: pass env=<backend env>, or implement "
            f"_build_env(*args, **kwargs) in the subclass. Got args={args}, "
            f"kwargs={sorted(kwargs)}."
        )

    def _make_specs(self, env: Any) -> None:
        """Set the specs from the backend env."""
        raise NotImplementedError(f"{type(self).__name__} must implement _make_specs(env).")

    def _init_env(self) -> None:
        """Finish the backend's setup after the specs are made (nothing by default)."""

    # ---------------------------------------------------------------- readers
    def read_action(self, action: torch.Tensor) -> Any:
        """Convert a tensor action to what the backend expects (numpy by default)."""
        if not self._convert_actions_to_numpy:
            return action
        return action.detach().cpu().numpy()

    def _read_plan(self) -> _ReadPlan:
        """The spec lookups of the readers, made once per version of the specs."""
        keys = self._key_cache()  # a new dict whenever a spec is set
        plan = self.__dict__.get("_plan")
        if plan is not None and plan.keys is keys and self._spec_locked:
            return plan
        plan = _ReadPlan.of(self, keys)
        self.__dict__["_plan"] = plan
        return plan

    def read_obs(self, observations: Any) -> dict[str, torch.Tensor]:
        """Convert backend observations (array or dict of arrays) to a dict of tensors."""
        if isinstance(observations, Mapping):
            if "state" in observations and "observation" not in observations:
                observations = dict(observations)
                observations["observation"] = observations.pop("state")
        else:
            observations = {"observation": observations}
        specs = self._read_plan().observation
        batch_size = self._batch_size
        return {
            key: encode_value(value, specs.get(key), batch_size)
            for key, value in observations.items()
        }

    def read_reward(self, reward: Any) -> torch.Tensor:
        """Convert a backend reward to a tensor shaped like ``reward_spec``."""
        spec = self._read_plan().reward
        if spec is None:
            spec = self.full_reward_spec[self.reward_key]  # raises: no single reward entry
        return encode_value(reward, spec, self._batch_size)

    def read_done(
        self, terminated: Any = None, truncated: Any = None, done: Any = None
    ) -> tuple[Any, Any, Any, bool]:
        """Return ``(terminated, truncated, done, do_break)``; ``done`` defaults to their OR."""
        if done is None:
            if type(terminated) is bool and type(truncated) is bool:  # python flags: one tensor
                done = torch.tensor(terminated or truncated)
                return terminated, truncated, done, terminated or truncated
            done = torch.zeros((), dtype=torch.bool)
            for flag in (terminated, truncated):
                if flag is not None:
                    done = done | torch.as_tensor(flag, dtype=torch.bool)
        if terminated is None:
            terminated = done
        do_break = bool(torch.as_tensor(done).any())
        return terminated, truncated, done, do_break

    def read_info(self, info: Any, tensordict_out: TensorDictBase) -> TensorDictBase:
        """Let every registered info reader write into ``tensordict_out``."""
        for reader in self._info_dict_reader:
            out = reader(info, tensordict_out)
            if isinstance(out, TensorDictBase):
                tensordict_out = out
        return tensordict_out

    @property
    def info_dict_reader(self) -> list[InfoReader]:
        """The registered info readers."""
        return self._info_dict_reader

    def set_info_dict_reader(self, info_dict_reader: InfoReader | None = None) -> GymLikeEnv:
        """Register a callable ``reader(info, tensordict_out)``; returns the env.

        When the reader has an ``info_spec`` (a ``Composite``), its entries are added
        to the observation spec, so that the values it writes are declared.

        Raises:
            TypeError: if ``info_dict_reader`` is not callable.
        """
        if info_dict_reader is None:
            return self
        if not callable(info_dict_reader):
            raise TypeError(
                f"set_info_dict_reader expected a callable reader(info, tensordict), got "
                f"{type(info_dict_reader).__name__}."
            )
        self._info_dict_reader.append(info_dict_reader)
        info_spec = getattr(info_dict_reader, "info_spec", None)
        if info_spec is not None:
            observation_spec = self.full_observation_spec.clone()
            observation_spec.unlock_()
            observation_spec.update(info_spec.expand(*self.batch_size, *info_spec.shape))
            self.full_observation_spec = observation_spec
        return self

    # ---------------------------------------------------------------- output transforms
    def _output_transform(self, step_outputs_tuple: tuple) -> tuple:
        """Normalise a step result to ``(obs, reward, terminated, truncated, done, info)``.

        Accepts the 5-tuple ``(obs, reward, terminated, truncated, info)`` and the
        legacy 4-tuple ``(obs, reward, done, info)``.

        Raises:
            ValueError: for any other tuple length.
        """
        if len(step_outputs_tuple) == 5:
            obs, reward, terminated, truncated, info = step_outputs_tuple
            return obs, reward, terminated, truncated, None, info
        if len(step_outputs_tuple) == 4:
            obs, reward, done, info = step_outputs_tuple
            return obs, reward, None, None, done, info
        raise ValueError(
            f"{type(self).__name__} expected the backend step to return 5 values (obs, "
            f"reward, terminated, truncated, info) or 4 (obs, reward, done, info), got "
            f"{len(step_outputs_tuple)}. Override _output_transform for this backend."
        )

    def _reset_output_transform(self, reset_outputs_tuple: Any) -> tuple[Any, dict]:
        """Normalise a reset result to ``(obs, info)``."""
        if (
            isinstance(reset_outputs_tuple, tuple)
            and len(reset_outputs_tuple) == 2
            and isinstance(reset_outputs_tuple[1], Mapping)
        ):
            return reset_outputs_tuple
        return reset_outputs_tuple, {}

    # ---------------------------------------------------------------- EnvBase API
    def _done_entries(self, terminated: Any, truncated: Any, done: Any) -> dict[str, torch.Tensor]:
        values = {"terminated": terminated, "truncated": truncated, "done": done}
        batch_size = self._batch_size
        out = {}
        for name, spec in self._read_plan().done:
            value = values[name]
            value = torch.zeros((), dtype=torch.bool) if value is None else value
            out[name] = encode_value(value, spec, batch_size)
        return out

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        """The step template: write the action, step the backend (its result normalised
        once, by ``_output_transform``; ``frame_skip`` steps by ``_skip_frames``), read
        the result, build the output.

        Adapters fill the steps (``_select_action``, ``read_action``,
        ``_output_transform``, ``read_obs``, ``_read_step``, ``_build_output``) rather
        than replace this method; the steps are methods of the class (an attribute
        of the same name set on an instance does not replace them).
        """
        # an env's attributes are read from its __dict__ and the stages from its class:
        # an nn.Module's attribute lookup (and bound method) costs several times that
        state, cls = self.__dict__, type(self)
        action = cls.read_action(self, cls._select_action(self, tensordict))
        result = cls._output_transform(self, state["_env"].step(action))
        if state["wrapper_frame_skip"] > 1:
            result = cls._skip_frames(self, action, result)
        out = cls._build_output(self, cls._read_step(self, *result))
        if state["_info_dict_reader"]:
            out = cls.read_info(self, result[5], out)
        return out

    def _select_action(self, tensordict: TensorDictBase) -> Any:
        """The action entry of ``tensordict`` (the env's only action key).

        Raises:
            KeyError: the env has several action entries (override this method), or
                ``tensordict`` has no action.
        """
        action_key = self._read_plan().action_key
        if action_key is None:
            action_key = self.action_key  # raises: no single action entry
        action = get_entry(tensordict, action_key)
        return tensordict.get(action_key) if action is None else action  # names the key

    def _skip_frames(self, action: Any, result: tuple) -> tuple:
        """Repeat ``action`` after the first backend step (normalised ``result``) up to
        ``frame_skip`` steps in all, stopping at an episode end; the rewards are summed
        and each result is normalised by ``_output_transform``."""
        obs, reward, terminated, truncated, done, info = result
        step, normalise = self._env.step, self._output_transform
        for _ in range(self.wrapper_frame_skip - 1):
            if _episode_ended(terminated, truncated, done):
                break
            obs, step_reward, terminated, truncated, done, info = normalise(step(action))
            if step_reward is not None:
                reward = step_reward if reward is None else reward + step_reward
        return obs, reward, terminated, truncated, done, info

    def _read_step(
        self, obs: Any, reward: Any, terminated: Any, truncated: Any, done: Any, info: Any
    ) -> dict[str, Any]:
        """The entries of a step output (``info`` is read later, by ``read_info``)."""
        terminated, truncated, done, _ = self.read_done(
            terminated=terminated, truncated=truncated, done=done
        )
        source = self.read_obs(obs)
        source[self.reward_key] = self.read_reward(0 if reward is None else reward)
        source.update(self._done_entries(terminated, truncated, done))
        return source

    def _build_output(self, source: dict[str, Any]) -> TensorDictBase:
        """The output tensordict of ``source`` (the env's batch size and device)."""
        return TensorDict(source, batch_size=self._batch_size, device=self._device)

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        obs, info = self._reset_output_transform(self._env.reset(**kwargs))
        out = self._build_output(self.read_obs(obs))
        return self.read_info(info, out)

    def _set_seed(self, seed: int | None) -> None:
        seeder = getattr(self._env, "seed", None)
        if callable(seeder):
            seeder(seed)
        else:
            self._env.reset(seed=seed)

    def close(self, *, raise_if_closed: bool = True) -> None:
        """Close the backend env."""
        closer = getattr(self.__dict__.get("_env"), "close", None)
        if callable(closer):
            closer()
        super().close(raise_if_closed=raise_if_closed)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            backend = self.__dict__.get("_env")
            if backend is None or name.startswith("__"):
                raise
            return getattr(backend, name)


def _episode_ended(*flags: Any) -> bool:
    """Whether any of the done flags (python, numpy or torch; ``None``: absent) is set."""
    return any(flag is not None and bool(torch.as_tensor(flag).any()) for flag in flags)
