"""``GymEnv``: build a gym / gymnasium env (or a batch of them) by id, then wrap it."""

from __future__ import annotations

import difflib
from functools import partial
from typing import Any

from rl_env_adapters._classproperty import classproperty
from rl_env_adapters._gym._backend import gym_backend
from rl_env_adapters._gym._wrapper import GymWrapper
from rl_envs_core.extension import make_parallel_env

__all__ = ["GymEnv"]

# Constructor keywords consumed by the wrapper; every other keyword goes to gym.make.
_WRAPPER_KWARGS = frozenset(
    {
        "from_pixels",
        "pixels_only",
        "frame_skip",
        "device",
        "batch_size",
        "allow_done_after_reset",
        "convert_actions_to_numpy",
        "spec_locked",
        "auto_reset",
        "auto_reset_replace",
        "run_type_checks",
    }
)


def _unknown_id_error(env_name: str, err: Exception) -> ValueError:
    known = list(gym_backend().registry.keys())
    close = difflib.get_close_matches(env_name, known, n=3)
    hint = f" Did you mean {close}?" if close else ""
    return ValueError(
        f"GymEnv got the unknown env id {env_name!r} ({err}).{hint} List the ids with "
        "GymEnv.available_envs, or import the package that registers it first."
    )


class GymEnv(GymWrapper):
    """OpenAI Gym environment wrapper constructed by environment ID directly.

    Args:
        env_name (str): the environment id registered in the gym(nasium) registry.
        categorical_action_encoding (bool, optional): see :class:`GymWrapper`.
            Defaults to ``False``.

    Keyword Args:
        num_workers (int, optional): run this many copies, each in its own worker
            process, as a :class:`~rl_batched_envs.ParallelEnv` (which is what
            ``GymEnv(...)`` then returns; its workers build the envs and report their
            metadata, ``metadata_from_workers=True``). ``1`` builds a plain
            ``GymEnv``. Needs rl-batched-envs, imported. Defaults to ``None`` (one env,
            in this process).
        num_envs (int, optional): run this many copies as one gymnasium vector env; the
            batch size becomes ``[num_envs]``. The vector env runs with auto-reset
            disabled and is reset per env (``reset_mask``) when an episode ends.
            Defaults to ``None`` (a single env).
        vectorization_mode (str, optional): ``"async"`` (subprocesses) or ``"sync"``.
            Defaults to ``"async"``.
        disable_env_checker (bool, optional): skip gym's env checker. Defaults to ``True``.
        render_mode (str, optional): gym's render mode; ``from_pixels`` sets
            ``"rgb_array"``. Defaults to ``None``.
        from_pixels, pixels_only, frame_skip, device, allow_done_after_reset: as in
            :class:`GymWrapper`.
        **kwargs: any other keyword goes to ``gym.make`` (e.g. ``g=9.81`` for Pendulum).

    Raises:
        ValueError: if ``env_name`` is not registered (close matches are suggested),
            or ``num_envs`` / ``num_workers`` is not a positive int.
        ImportError: if no gym backend is installed (names the extra to install), or
            ``num_workers`` is given without rl-batched-envs.

    Examples:
        >>> from rl_env_adapters import GymEnv
        >>> env = GymEnv("CartPole-v1", categorical_action_encoding=True)
        >>> env.action_spec.shape, env.observation_spec["observation"].shape
        (torch.Size([]), torch.Size([4]))
        >>> GymEnv("Pendulum-v1", num_envs=2, vectorization_mode="sync").batch_size
        torch.Size([2])
    """

    def __new__(cls, *args: Any, num_workers: int | None = None, **kwargs: Any) -> Any:
        """``num_workers > 1`` returns a ``ParallelEnv`` of ``GymEnv`` s (see the class)."""
        if num_workers is None:
            return super().__new__(cls)
        if not isinstance(num_workers, int) or isinstance(num_workers, bool) or num_workers < 1:
            raise ValueError(
                f"GymEnv expected num_workers to be a positive int, got {num_workers!r}. Pass "
                "num_workers=None (or 1) for a single env in this process."
            )
        if num_workers == 1:
            return super().__new__(cls)
        if not args and "env_name" not in kwargs:
            raise TypeError("GymEnv() missing the env id: GymEnv('CartPole-v1', ...).")
        return make_parallel_env(
            num_workers, partial(cls, *args, **kwargs), metadata_from_workers=True
        )

    def __init__(
        self,
        env_name: str,
        categorical_action_encoding: bool = False,
        *,
        num_workers: int | None = None,
        **kwargs: Any,
    ) -> None:
        del num_workers  # 1 or None here; more is handled by __new__
        wrapper_kwargs = {k: kwargs.pop(k) for k in list(kwargs) if k in _WRAPPER_KWARGS}
        env = self._make_gym_env(
            env_name,
            from_pixels=bool(wrapper_kwargs.get("from_pixels", False)),
            pixels_only=bool(wrapper_kwargs.get("pixels_only", True)),
            **kwargs,
        )
        self.__dict__["env_name"] = env_name
        super().__init__(
            env, categorical_action_encoding=categorical_action_encoding, **wrapper_kwargs
        )

    @staticmethod
    def _make_gym_env(
        env_name: str,
        *,
        from_pixels: bool,
        pixels_only: bool,
        num_envs: int | None = None,
        vectorization_mode: str = "async",
        disable_env_checker: bool = True,
        **kwargs: Any,
    ) -> Any:
        if not isinstance(env_name, str):
            raise TypeError(
                f"GymEnv expected an env id (str) such as 'CartPole-v1', got "
                f"{type(env_name).__name__}. To wrap an env object, use GymWrapper(env)."
            )
        gym = gym_backend()
        if from_pixels and kwargs.get("render_mode") is None:
            kwargs["render_mode"] = "rgb_array"
        error = gym.error.Error
        try:
            if num_envs is None:
                return gym.make(env_name, disable_env_checker=disable_env_checker, **kwargs)
            if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
                raise ValueError(
                    f"GymEnv expected num_envs to be a positive int, got {num_envs!r}. Pass "
                    "num_envs=None for a single env."
                )
            wrappers = None
            if from_pixels:
                add = gym_backend("wrappers").AddRenderObservation
                wrappers = [partial(add, render_only=False, render_key="pixels", obs_key="state")]
            vector = gym_backend("vector")
            return gym.make_vec(
                env_name,
                num_envs=num_envs,
                vectorization_mode=vectorization_mode,
                vector_kwargs={"autoreset_mode": vector.AutoresetMode.DISABLED},
                wrappers=wrappers,
                disable_env_checker=disable_env_checker,
                **kwargs,
            )
        except error as err:
            if type(err).__name__ in ("NameNotFound", "NamespaceNotFound", "VersionNotFound"):
                raise _unknown_id_error(env_name, err) from err
            raise

    @classproperty
    def available_envs(cls) -> list[str]:
        """The env ids registered in the current gym backend."""
        return list(gym_backend().registry.keys())
