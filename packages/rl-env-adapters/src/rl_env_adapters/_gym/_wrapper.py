"""``GymWrapper``: a gym / gymnasium env (single or vector) as a ``GymLikeEnv``.

Specs come from the spaces (``_spaces.py``), values go through readers and writers
compiled once per spec (``_arrays.py``). Vector envs are driven so that no step
whose action the backend ignores is ever returned: partial resets use
``reset(options={"reset_mask": ...})``; in gymnasium's SAME_STEP auto-reset mode the
terminal observation is read from ``info["final_obs"]`` and the already-made reset
observation is handed out at the next partial reset.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase

from rl_env_adapters import _compat
from rl_env_adapters._gym._arrays import make_reader, make_writer
from rl_env_adapters._gym._backend import gym_backend
from rl_env_adapters._gym._buffered import GymStepper, gym_stepper
from rl_env_adapters._gym._info import InfoDictReader
from rl_env_adapters._gym._spaces import gym_space_to_spec
from rl_env_adapters._step_scalars import StepScalars
from rl_env_adapters._td_out import OutputBuilder
from rl_envs_core import GymLikeEnv
from rl_envs_core.extension import get_entry
from rl_specs import Composite, Unbounded

__all__ = ["GymWrapper"]

_SAME_STEP = _compat.SAME_STEP


# Any in this module: gym envs, spaces, observations and infos are library-defined.


def _obs_spec(space: Any, key: str, **kwargs: Any) -> tuple[Composite, bool]:
    """Spec of one env's observations as a Composite, and whether the space is a Dict."""
    spec = gym_space_to_spec(space, **kwargs)
    if isinstance(spec, Composite):
        return spec, True
    return Composite({key: spec}, shape=()), False


class GymWrapper(GymLikeEnv):
    """OpenAI Gym environment wrapper.

    Works across gymnasium and the legacy gym. Vector envs (``gymnasium.vector.VectorEnv``)
    are supported: the env batch size is their number of envs.

    Args:
        env (gym.Env): the environment to wrap.
        categorical_action_encoding (bool, optional): ``Discrete`` spaces become
            :class:`~rl_specs.Categorical` (index values) instead of
            :class:`~rl_specs.OneHot`. Defaults to ``False``.

    Keyword Args:
        from_pixels (bool, optional): add the rendered frame to the observations, under
            ``"pixels"``; the env must render ``rgb_array``. Defaults to ``False``.
        pixels_only (bool, optional): with ``from_pixels``, return only the pixels.
            Defaults to ``True``.
        frame_skip (int, optional): repeat each action this many times, summing the
            rewards; stops early at the end of an episode. Defaults to ``1``.
        device (torch.device, optional): where the output data is put. Defaults to ``None``.
        allow_done_after_reset (bool, optional): tolerate a done flag right after a
            reset. Defaults to ``False``.
        convert_actions_to_numpy (bool, optional): give the env numpy actions.
            Defaults to ``True``.

    Raises:
        TypeError: if ``env`` is not a gym env, or one of its spaces has no conversion.

    Examples:
        >>> import gymnasium
        >>> from rl_env_adapters import GymWrapper
        >>> env = GymWrapper(gymnasium.make("Pendulum-v1"))
        >>> _ = env.set_seed(0)
        >>> data = env.rollout(3)
        >>> data["next", "observation"].shape, data["action"].shape
        (torch.Size([3, 3]), torch.Size([3, 1]))
    """

    git_url = "https://github.com/Farama-Foundation/Gymnasium"
    libname = "gym"

    def __init__(
        self,
        env: Any = None,
        categorical_action_encoding: bool = False,
        **kwargs: Any,
    ) -> None:
        if env is None:
            env = kwargs.pop("env", None)
        if env is None or not hasattr(env, "step") or not hasattr(env, "observation_space"):
            raise TypeError(
                f"{type(self).__name__} expected a gym(nasium) env with step() and "
                f"observation_space, got {type(env).__name__}. Pass gymnasium.make(...) or use "
                "GymEnv('<env id>')."
            )
        from_pixels = bool(kwargs.pop("from_pixels", False))
        pixels_only = bool(kwargs.pop("pixels_only", True))
        batched = _compat.is_vector_env(env)
        if from_pixels and not _has_pixels(env):
            if batched:
                raise ValueError(
                    "from_pixels=True on a vector env needs its sub-envs to carry the pixels "
                    "already. Use GymEnv(env_id, num_envs=n, from_pixels=True), or wrap each "
                    "sub-env with gymnasium.wrappers.AddRenderObservation(render_key='pixels')."
                )
            env = self._add_pixels(env, pixels_only)
        state = self.__dict__
        state["_categorical_action_encoding"] = bool(categorical_action_encoding)
        state["from_pixels"] = from_pixels
        state["pixels_only"] = pixels_only
        state["_batched"] = batched
        state["_autoreset_mode"] = _compat.autoreset_mode(env) if batched else None
        kwargs.setdefault("batch_size", torch.Size([env.num_envs] if batched else []))
        run_type_checks = bool(kwargs.pop("run_type_checks", False))  # GymLikeEnv drops it
        super().__init__(env=env, **kwargs)
        self.run_type_checks = run_type_checks
        if batched and self._autoreset_mode != _compat.DISABLED:
            # an auto-resetting vector env: its infos carry the data of the steps the
            # backend hides (the terminal ones), so they are read, as TorchRL does
            self.set_info_dict_reader()

    @staticmethod
    def _add_pixels(env: Any, pixels_only: bool) -> Any:
        render_mode = getattr(env, "render_mode", None)
        if render_mode != "rgb_array":
            raise ValueError(
                f"from_pixels=True needs an env rendering 'rgb_array' frames, got render_mode="
                f"{render_mode!r}. Build it with gymnasium.make(..., render_mode='rgb_array')."
            )
        wrappers = gym_backend("wrappers")
        return wrappers.AddRenderObservation(
            env, render_only=pixels_only, render_key="pixels", obs_key="state"
        )

    # ------------------------------------------------------------------ specs
    def _make_specs(self, env: Any) -> None:
        batch = self.batch_size
        obs_space = env.single_observation_space if self._batched else env.observation_space
        act_space = env.single_action_space if self._batched else env.action_space
        device = self.device
        conv = {"categorical_action_encoding": self._categorical_action_encoding, "device": device}
        key = "pixels" if self.from_pixels and self.pixels_only else "observation"
        pick_pixels = self.from_pixels and self.pixels_only and _has_pixels(env)
        if pick_pixels:  # the sub-envs carry state and pixels: keep the pixels only
            obs_space = obs_space.spaces["pixels"]
        obs_spec, obs_is_dict = _obs_spec(obs_space, key, **conv)
        action_spec = gym_space_to_spec(act_space, remap_state_to_observation=False, **conv)
        self.observation_spec = obs_spec.expand(*batch)
        if isinstance(action_spec, Composite):
            self.full_action_spec = action_spec.expand(*batch)
        else:
            self.action_spec = action_spec.expand(*batch, *action_spec.shape)
        self.reward_spec = Unbounded(shape=(*batch, 1), device=device, dtype=torch.float32)
        self.add_truncated_keys()  # gymnasium reports truncation apart from termination
        ndim = len(batch)
        read = make_reader(obs_space, obs_spec if obs_is_dict else obs_spec[key], batch_dims=ndim)
        state = self.__dict__
        if obs_is_dict:
            state["_read_obs"] = read
        elif pick_pixels:
            state["_read_obs"] = lambda obs: {key: read(obs["pixels"])}
        else:
            state["_read_obs"] = lambda obs: {key: read(obs)}
        state["_write_action"] = make_writer(act_space, action_spec, batch_dims=ndim)
        state["_action_key_cached"] = "action" if not isinstance(action_spec, Composite) else None
        state["_pending_obs"] = None  # SAME_STEP: reset observations waiting for a reset call
        state["_output_builder"] = OutputBuilder(obs_spec, device)
        state["_scalars"] = StepScalars()  # reward and flags of unbatched steps

    def _init_env(self) -> None:
        if self._batched and self._autoreset_mode not in (
            _compat.NEXT_STEP,
            _compat.SAME_STEP,
            _compat.DISABLED,
        ):
            raise ValueError(
                f"Unknown autoreset_mode {self._autoreset_mode!r} in the vector env metadata. "
                "Expected one of gymnasium.vector.AutoresetMode: NextStep, SameStep, Disabled."
            )

    # ------------------------------------------------------------------ info
    def set_info_dict_reader(
        self,
        info_dict_reader: Any = None,
        ignore_private: bool = True,
    ) -> GymWrapper:
        """Register a reader of the ``info`` dicts; its specs join the observation spec.

        Without a reader, one is built from the entries of the info returned by a
        reset (numeric entries only; names starting with ``_`` are skipped when
        ``ignore_private``), so this call resets the env.

        Args:
            info_dict_reader (callable, optional): ``reader(info, tensordict)``. Defaults
                to ``None`` (discover the entries).
            ignore_private (bool, optional): skip ``_``-prefixed entries when discovering.
                Defaults to ``True``.

        Examples:
            >>> import gymnasium
            >>> from rl_env_adapters import GymWrapper
            >>> env = GymWrapper(gymnasium.make("CartPole-v1")).set_info_dict_reader()
            >>> env.rollout(2)["next"].batch_size
            torch.Size([2])
        """
        if info_dict_reader is None:
            _, info = self._reset_output_transform(self._env.reset())
            info_dict_reader = InfoDictReader.from_info(
                info, batch_size=self.batch_size, ignore_private=ignore_private
            )
        super().set_info_dict_reader(info_dict_reader)
        info_spec = getattr(info_dict_reader, "info_spec", None)
        if info_spec is not None and len(list(info_spec.keys())):
            spec = self.full_observation_spec.clone()
            spec.update(info_spec.to(self.device) if self.device is not None else info_spec)
            self.observation_spec = spec
        return self

    # ------------------------------------------------------------------ step / reset
    # GymLikeEnv's step template, filled: action -> backend step -> read -> output
    def _select_action(self, tensordict: TensorDictBase) -> Any:
        key = self._action_key_cached
        if key is None:  # a composite action: its sub-tensordict (or the whole input)
            return tensordict.get("action", tensordict)
        action = get_entry(tensordict, key)
        return tensordict.get(key) if action is None else action  # names a missing key

    def read_action(self, action: Any) -> Any:
        """Convert a tensor action (or a tensordict of them) to the env's action space."""
        state = self.__dict__  # one attribute lookup (nn.Module's are slow), then dict reads
        return state["_write_action"](action) if state["_convert_actions_to_numpy"] else action

    def read_obs(self, observations: Any) -> dict[str, Any]:
        """Convert gym observations to a dict of tensors (the reader compiled for the spec)."""
        return self._read_obs(observations)

    def _read_step(
        self, obs: Any, reward: Any, terminated: Any, truncated: Any, done: Any, info: Any
    ) -> dict[str, Any]:
        if done is not None:  # a legacy 4-value step: done alone, read as terminated
            terminated, truncated = done, False
        state = self.__dict__  # one attribute lookup (nn.Module's are slow), then dict reads
        if state["_batched"]:
            return self._batched_outputs(obs, reward, terminated, truncated, info)
        source = state["_read_obs"](obs)  # what read_obs does, one call less per step
        (
            source["reward"],
            source["terminated"],
            source["truncated"],
            source["done"],
        ) = state["_scalars"](reward, bool(terminated), bool(truncated))
        return source

    def _build_output(self, source: dict[str, Any]) -> TensorDictBase:
        state = self.__dict__  # one attribute lookup (nn.Module's are slow), then dict reads
        return state["_output_builder"](source, state["_batch_size"], state["_device"])

    def _batched_outputs(
        self,
        obs: Any,
        reward: Any,
        terminated: Any,
        truncated: Any,
        info: Any,
    ) -> dict[str, Any]:
        done = np.logical_or(terminated, truncated)
        source = self._read_obs(obs)
        source["reward"] = torch.from_numpy(np.asarray(reward, dtype=np.float32)).unsqueeze(-1)
        source["terminated"] = torch.from_numpy(np.asarray(terminated, dtype=bool)).unsqueeze(-1)
        source["truncated"] = torch.from_numpy(np.asarray(truncated, dtype=bool)).unsqueeze(-1)
        source["done"] = torch.from_numpy(done).unsqueeze(-1)
        return source

    def _output_transform(self, step_outputs_tuple: tuple) -> tuple:
        """Normalise a backend step; for a SAME_STEP vector env, where an episode ended,
        give the terminal observations and infos (kept for the coming partial reset:
        the backend already reset those envs)."""
        out = GymLikeEnv._output_transform(self, step_outputs_tuple)  # no super(): per step
        if self._autoreset_mode != _SAME_STEP:
            return out
        obs, reward, terminated, truncated, done, info = out
        ended = np.logical_or(terminated, truncated) if done is None else np.asarray(done)
        if not ended.any():
            return out
        self.__dict__["_pending_obs"] = (ended.copy(), obs, info)
        obs, info = _final_obs(info, obs, ended), _final_info(info, ended)
        return obs, reward, terminated, truncated, done, info

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        mask = None
        if self._batched and tensordict is not None:
            reset = tensordict.get("_reset", None)
            if reset is not None:
                mask = reset.reshape(self.batch_size).cpu().numpy()
        pending = self.__dict__["_pending_obs"]
        if mask is not None and pending is not None and np.array_equal(mask, pending[0]):
            self.__dict__["_pending_obs"] = None
            obs, info = pending[1], pending[2]
        else:
            self.__dict__["_pending_obs"] = None
            if mask is not None and not mask.all():
                if not mask.any():
                    return tensordict.exclude("_reset", "next")
                options = dict(kwargs.pop("options", None) or {})
                options["reset_mask"] = mask
                kwargs["options"] = options
            obs, info = self._reset_output_transform(self._env.reset(**kwargs))
        out = self._build_output(self.read_obs(obs))
        return self.read_info(info, out) if self._info_dict_reader else out

    def buffered_stepper(self, batch: TensorDictBase) -> GymStepper | None:
        """Step straight into ``batch``'s tensors (``SupportsBufferedSteps``), or decline.

        The fast path of the collectors and ``rollout``: see
        ``rl_envs_core.extension.SupportsBufferedSteps``. A single env with a ``Box``
        observation and no info reader, frame skip or overridden step method gets a
        stepper once a first step went through ``env.step``'s checks; anything else
        gets ``None`` (the general path).

        Examples:
            >>> import torch
            >>> from rl_env_adapters import GymEnv
            >>> from rl_envs_core.extension import BufferedRollout
            >>> env = GymEnv("CartPole-v1")
            >>> _ = env.rand_step(env.reset())  # a first step through env.step's checks
            >>> engine = BufferedRollout.of(env)
            >>> batch = engine.allocate(3)
            >>> batch["action"] = env.action_spec.rand(torch.Size([3]))
            >>> env.buffered_stepper(batch) is not None
            True
        """
        return gym_stepper(self, GymWrapper, batch)

    def __getattr__(self, name: str) -> Any:  # Any: whatever the gym env holds
        try:
            return super().__getattr__(name)
        except AttributeError:
            # gymnasium's wrappers (TimeLimit, ...) no longer forward attributes: look
            # through them to the base env, as `env.g` on a Pendulum expects
            getter = getattr(self.__dict__.get("_env"), "get_wrapper_attr", None)
            if getter is None or name.startswith("__"):
                raise
            return getter(name)

    def _set_seed(self, seed: int | None) -> None:
        _compat.seed_env(self._env, seed)
        self.__dict__["_pending_obs"] = None
        space = getattr(self._env, "action_space", None)
        if seed is not None and hasattr(space, "seed"):
            space.seed(seed)


def _has_pixels(env: Any) -> bool:
    space = getattr(env, "single_observation_space", None) or env.observation_space
    return "pixels" in getattr(space, "spaces", {})


def _final_obs(info: Any, obs: Any, done: np.ndarray) -> Any:
    """The terminal observations of a SAME_STEP vector step (``obs`` where not done)."""
    final = info.get("final_obs", None) if hasattr(info, "get") else None
    if final is None:
        raise KeyError(
            "A SAME_STEP vector env finished an episode but its info has no 'final_obs'. "
            "Build the vector env with gymnasium >= 1.0 or use autoreset_mode=DISABLED."
        )
    if isinstance(obs, np.ndarray):
        out = obs.copy()
        for i in np.flatnonzero(done):
            out[i] = final[i]
        return out
    if isinstance(obs, dict):
        return {k: _final_obs({"final_obs": _pick(final, k)}, v, done) for k, v in obs.items()}
    raise TypeError(
        f"SAME_STEP terminal observations are read for array or dict observations, got "
        f"{type(obs).__name__}. Use autoreset_mode=DISABLED for this vector env."
    )


def _final_info(info: Any, done: np.ndarray) -> Any:
    """A SAME_STEP vector step's info with the terminal infos where an episode ended
    (``info["final_info"]``; the entries there are those of the reset infos)."""
    final = info.get("final_info", None) if hasattr(info, "get") else None
    if not final:
        return info
    merged = dict(info)
    for key, value in info.items():
        if key.startswith("_") or key in ("final_obs", "final_info") or key not in final:
            continue
        if isinstance(value, dict):  # nested infos: left as the backend gave them
            continue
        has = np.asarray(final.get(f"_{key}", done), dtype=bool) & done
        value = np.array(value, copy=True)
        value[has] = np.asarray(final[key])[has]
        merged[key] = value
    return merged


def _pick(final: Any, key: str) -> np.ndarray:
    """Per-env entry ``key`` of an object array of terminal dict observations."""
    return np.array([None if f is None else f[key] for f in final], dtype=object)
