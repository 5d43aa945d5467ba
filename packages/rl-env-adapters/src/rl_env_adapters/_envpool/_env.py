"""EnvPool as an ``EnvBase``: ``MultiThreadedEnvWrapper`` and ``MultiThreadedEnv``.

The env batch size is ``[num_envs]``. Stepping gives every env its action and
gathers one result per env (several ``recv`` calls when the pool is asynchronous).
EnvPool auto-resets an env on the call after it finished, ignoring the action; that
call never reaches the caller: finished envs are reset explicitly (by ``env_id``),
either through the partial reset that rollouts make or, if the caller steps again
without one, right before the step. The reset is sent as soon as the step returns
(see ``_resets.py``), so that it runs while the caller handles the step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from rl_env_adapters._classproperty import classproperty
from rl_env_adapters._envpool._buffered import PoolStepper, pool_stepper
from rl_env_adapters._envpool._resets import PoolResets
from rl_env_adapters._envpool._specs import (
    check_seed,
    check_task_id,
    envpool_module,
    specs_from_envpool,
)
from rl_env_adapters._envpool._time_major import CallRecord
from rl_env_adapters._td_out import OutputBuilder
from rl_envs_core import EnvBase

__all__ = ["MultiThreadedEnv", "MultiThreadedEnvWrapper"]

# Any in this module: EnvPool objects and arrays are library-defined.

#: envpool.make keywords also accepted at the top level of MultiThreadedEnv.
_POOL_KWARGS = ("seed", "max_episode_steps", "num_threads", "render_mode", "from_pixels")


def _pool_config(env: Any) -> dict[str, Any]:
    if any(cls.__name__ == "DMEnvPoolMixin" for cls in type(env).__mro__):
        raise TypeError(
            "MultiThreadedEnvWrapper wraps gym-style EnvPool pools, got a dm_env pool "
            f"({type(env).__name__}). Build it with envpool.make(task_id, env_type='gymnasium')."
        )
    config = getattr(env, "config", None)
    if not isinstance(config, dict) or "num_envs" not in config:
        raise TypeError(
            f"MultiThreadedEnvWrapper expected an EnvPool env (from envpool.make), got "
            f"{type(env).__name__}. Build one with envpool.make(task_id, env_type='gymnasium', "
            "num_envs=n), or use MultiThreadedEnv(num_workers, task_id)."
        )
    return config


class MultiThreadedEnvWrapper(EnvBase):
    """Wrapper for envpool-based multithreaded environments.

    GitHub: https://github.com/sail-sg/envpool. The pool must be built with
    ``env_type="gymnasium"`` (or ``"gym"``).

    Args:
        env (envpool.python.envpool.EnvPoolMixin): the pool to wrap.
        categorical_action_encoding (bool, optional): ``Discrete`` actions as indices
            (:class:`~rl_specs.Categorical`, e.g. ``torch.tensor([0, 1])`` for two envs),
            as TorchRL's EnvPool wrapper gives them; ``False`` for one-hot
            (:class:`~rl_specs.OneHot`). Defaults to ``True``.

    Keyword Args:
        disable_env_checker (bool, optional): kept for API compatibility (EnvPool has no
            checker). Defaults to ``True``.
        frame_skip (int, optional): repeat each action this many times, summing rewards;
            envs that finish early stop accumulating. Defaults to ``1``.
        device (torch.device, optional): where the output data is put. Defaults to cpu.
        allow_done_after_reset (bool, optional): tolerate a done right after a reset.
            Defaults to ``False``.

    Raises:
        TypeError: if ``env`` is not an EnvPool env.
        ImportError: if envpool is not installed (names the extra to install).

    Examples:
        >>> import envpool
        >>> from rl_env_adapters import MultiThreadedEnvWrapper
        >>> pool = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=4, seed=0)
        >>> env = MultiThreadedEnvWrapper(pool)
        >>> env.batch_size
        torch.Size([4])
        >>> env.rollout(3)["next", "observation"].shape
        torch.Size([4, 3, 4])
    """

    git_url = "https://github.com/sail-sg/envpool"
    libname = "envpool"

    def __init__(
        self,
        env: Any = None,
        categorical_action_encoding: bool = True,
        *,
        disable_env_checker: bool = True,
        frame_skip: int | None = None,
        device: torch.device | str | None = None,
        allow_done_after_reset: bool = False,
        **kwargs: Any,
    ) -> None:
        envpool_module(type(self).__name__)
        config = _pool_config(env)
        num_envs = int(config["num_envs"])
        super().__init__(
            device=device,
            batch_size=torch.Size([num_envs]),
            allow_done_after_reset=allow_done_after_reset,
            **kwargs,
        )
        state = self.__dict__
        state["_categorical_action_encoding"] = bool(categorical_action_encoding)
        state["disable_env_checker"] = disable_env_checker
        state["frame_skip"] = int(frame_skip or 1)
        if self.frame_skip < 1:
            raise ValueError(f"frame_skip must be >= 1, got {frame_skip}. Pass 1 to disable it.")
        self._set_pool(env)

    # ------------------------------------------------------------------ pool and specs
    def _set_pool(self, env: Any) -> None:
        config = _pool_config(env)
        num_envs = int(config["num_envs"])
        specs = specs_from_envpool(
            env.spec,
            num_envs=num_envs,
            categorical_action_encoding=self._categorical_action_encoding,
            device=self.device,
            from_pixels=bool(config.get("from_pixels", False)),
        )
        state = self.__dict__
        state["_env"] = env
        state["num_envs"] = num_envs
        state["pool_batch_size"] = int(config.get("batch_size", num_envs) or num_envs)
        state["_is_async"] = self.pool_batch_size < num_envs
        state["_read_obs"] = specs.read_obs
        state["_write_action"] = specs.write_action
        state["_all_ids"] = np.arange(num_envs, dtype=np.int32)
        # render() shows an env's state, so a pool that renders is reset when asked
        prefetch = getattr(env, "render_mode", None) is None
        state["_resets"] = PoolResets(env, specs.read_obs, num_envs, prefetch=prefetch)
        state["_call_record"] = CallRecord(env)  # the in-place path's buffers (_time_major.py)
        state["_build_output"] = OutputBuilder(specs.observation, self.device)
        if self.full_observation_spec != specs.observation:
            self.observation_spec = specs.observation
            self.action_spec = specs.action
            self.reward_spec = specs.reward
            self.add_truncated_keys()  # EnvPool reports truncation apart from termination

    @classproperty
    def available_envs(cls) -> list[str]:
        """The task ids EnvPool implements (``envpool.list_all_envs()``)."""
        return list(envpool_module(cls.__name__).list_all_envs())

    @property
    def is_async(self) -> bool:
        """Whether the pool returns fewer results per ``recv`` than it has envs."""
        return self._is_async

    # ------------------------------------------------------------------ sync API (EnvBase)
    def _check_sync(self) -> None:
        if self._is_async:
            raise RuntimeError(
                f"This EnvPool pool is asynchronous (batch_size={self.pool_batch_size} < "
                f"num_envs={self.num_envs}): step/reset/rollout need a synchronous pool. Drive it "
                "with async_reset(), send(tensordict) and recv(), or build it without batch_size."
            )

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self._check_sync()
        resets = self._resets
        resets.before_step()  # envs finished and not reset since start from a reset
        action = self._write_action(tensordict.get("action"))
        record = self._call_record
        if isinstance(action, np.ndarray):
            # the pool's C++ send / recv (direct_step): EnvPool's step adds Python layers
            action = np.ascontiguousarray(action, dtype=record.action_dtype)
            obs, reward, done, truncated = record.step(action, None)
            terminated = done > truncated
        else:
            obs, reward, terminated, truncated, _ = self._env.step(action)
        if self.frame_skip > 1:
            obs, reward, terminated, truncated = self._skip_frames(
                action, obs, reward, terminated, truncated
            )
        done = terminated | truncated
        resets.after_step(done.copy())  # the output tensors share done's memory
        source = self._read_obs(obs)
        # numpy views are cheaper than torch's unsqueeze; each flag has its own array
        column = (self.num_envs, 1)
        source["reward"] = torch.from_numpy(reward.astype(np.float32, copy=False).reshape(column))
        source["terminated"] = torch.from_numpy(terminated.reshape(column))
        source["truncated"] = torch.from_numpy(truncated.reshape(column))
        source["done"] = torch.from_numpy(done.reshape(column))
        return self._output(source)

    def _output(self, source: dict[str, Any]) -> TensorDictBase:
        return self._build_output(source, self.batch_size, self.device)

    def _skip_frames(
        self,
        action: Any,
        obs: Any,
        reward: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
    ) -> tuple:
        reward = reward.astype(np.float32)
        for _ in range(self.frame_skip - 1):
            running = ~(terminated | truncated)
            if not running.any():
                break
            ids = self._all_ids[running]
            sub = action[running] if isinstance(action, np.ndarray) else action
            o, r, te, tr, _ = self._env.step(sub, ids)
            obs = obs.copy()
            obs[running], reward[running] = o, reward[running] + r
            terminated, truncated = terminated.copy(), truncated.copy()
            terminated[running], truncated[running] = te, tr
        return obs, reward, terminated, truncated

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        self._check_sync()
        reset = tensordict.get("_reset", None) if tensordict is not None else None
        mask = None if reset is None else reset.reshape(self.num_envs).cpu().numpy()
        return self._output(self._resets.reset(mask))

    def _set_seed(self, seed: int | None) -> None:
        raise RuntimeError(
            "EnvPool fixes its seeds when the pool is built, so a wrapped pool cannot be "
            "reseeded. Build it with envpool.make(..., seed=N), or use MultiThreadedEnv, "
            "which rebuilds its pool on set_seed."
        )

    def buffered_stepper(self, batch: TensorDictBase) -> PoolStepper | None:
        """Step straight into ``batch``'s tensors (``SupportsBufferedSteps``), or decline.

        The fast path of the collectors and ``rollout``: see
        ``rl_envs_core.extension.SupportsBufferedSteps``. A synchronous pool with one
        array observation, ``frame_skip=1`` and no overridden step gets a stepper
        writing EnvPool's batched arrays into ``batch`` once a first step went
        through ``env.step``'s checks; anything else gets ``None``.

        Examples:
            >>> import torch
            >>> from rl_env_adapters import MultiThreadedEnv
            >>> from rl_envs_core.extension import BufferedRollout
            >>> env = MultiThreadedEnv(2, "CartPole-v1")
            >>> _ = env.rand_step(env.reset())  # a first step through env.step's checks
            >>> batch = BufferedRollout.of(env).allocate(3)
            >>> batch["action"] = env.action_spec.rand(torch.Size([3])).transpose(0, 1)
            >>> env.buffered_stepper(batch) is not None
            True
        """
        return pool_stepper(self, MultiThreadedEnvWrapper, batch)

    # ------------------------------------------------------------------ extended API
    def async_reset(self) -> None:
        """Send a reset to every env without waiting (EnvPool's ``async_reset``)."""
        self._resets.forget()
        self._env.async_reset()

    def send(self, tensordict: TensorDictBase) -> None:
        """Send the ``"action"`` of ``tensordict`` to the envs listed in its ``"env_id"``.

        Raises:
            KeyError: if ``"env_id"`` or ``"action"`` is missing.
        """
        missing = [key for key in ("env_id", "action") if key not in tensordict.keys()]
        if missing:
            raise KeyError(
                f"send expected 'action' and 'env_id' entries, missing {missing}. Pass back the "
                f"tensordict from recv() with an action set. Available keys: "
                f"{sorted(tensordict.keys())}."
            )
        env_id = tensordict.get("env_id").reshape(-1).cpu().numpy().astype(np.int32)
        self._resets.settle()
        self._env.send(self._write_action(tensordict.get("action")), env_id)

    def recv(self) -> TensorDictBase:
        """Receive the results of the envs that finished first (``pool_batch_size`` of them).

        The result holds the observations, ``"reward"``, ``"done"``, ``"terminated"``,
        ``"truncated"``, ``"env_id"`` and ``"is_init"`` (``True`` for a first observation:
        after a reset, or when EnvPool auto-reset an env that had finished, in which
        case the action sent was not applied).

        Examples:
            >>> import envpool
            >>> from rl_env_adapters import MultiThreadedEnvWrapper
            >>> pool = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=4, batch_size=2)
            >>> env = MultiThreadedEnvWrapper(pool, categorical_action_encoding=True)
            >>> env.async_reset()
            >>> data = env.recv()
            >>> data.batch_size, bool(data["is_init"].all())
            (torch.Size([2]), True)
            >>> env.send(data.set("action", torch.zeros(2, dtype=torch.long)))
            >>> env.recv()["env_id"].shape
            torch.Size([2])
        """
        self._resets.settle()
        result = self._env.recv()
        obs, reward, terminated, truncated, info = result
        batch = torch.Size([len(info["env_id"])])
        source = self._read_obs(obs)
        source["reward"] = torch.from_numpy(np.asarray(reward, dtype=np.float32)).unsqueeze(-1)
        terminated, truncated = np.asarray(terminated), np.asarray(truncated)
        source["terminated"] = torch.from_numpy(terminated).unsqueeze(-1)
        source["truncated"] = torch.from_numpy(truncated).unsqueeze(-1)
        source["done"] = torch.from_numpy(terminated | truncated).unsqueeze(-1)
        source["env_id"] = torch.from_numpy(info["env_id"].astype(np.int64))
        source["is_init"] = torch.from_numpy(info["elapsed_step"] == 0).unsqueeze(-1)
        return TensorDict(source, batch_size=batch, device=self.device)

    def render(
        self, env_ids: int | Sequence[int] | None = None, camera_id: int | None = None
    ) -> torch.Tensor | None:
        """Render frames, shape ``(B, H, W, 3)`` uint8 (the pool needs ``render_mode``).

        Raises:
            RuntimeError: if the pool was built without a ``render_mode``.
        """
        if getattr(self._env, "render_mode", None) is None:
            raise RuntimeError(
                "This EnvPool pool was built without render_mode, so it cannot render. Build it "
                "with render_mode='rgb_array' (MultiThreadedEnv(..., render_mode='rgb_array'))."
            )
        self._resets.settle()
        frames = self._env.render(env_ids=env_ids, camera_id=camera_id)
        return None if frames is None else torch.from_numpy(np.ascontiguousarray(frames))

    def close(self, *, raise_if_closed: bool = True) -> None:
        """Close the pool."""
        resets = self.__dict__.get("_resets")
        if resets is not None and not getattr(self, "is_closed", False):
            resets.settle()
        closer = getattr(self.__dict__.get("_env"), "close", None)
        if callable(closer):
            closer()
        super().close()


class MultiThreadedEnv(MultiThreadedEnvWrapper):
    """Multithreaded execution of environments based on EnvPool.

    An alternative to ``ParallelEnv`` based on threads: no subprocesses, but only the
    tasks EnvPool implements (``envpool.list_all_envs()``).

    Args:
        num_workers (int): the number of envs run together (the batch size).
        env_name (str): the EnvPool task id, e.g. ``"CartPole-v1"``. The two positional
            arguments may also be given as ``(env_name, num_workers)``.

    Keyword Args:
        create_env_kwargs (dict, optional): keywords for ``envpool.make`` (``seed``,
            ``max_episode_steps``, ``batch_size`` for asynchronous pools, ``num_threads``,
            ``render_mode``, ``from_pixels``, task options). Defaults to ``None``.
        num_envs (int, optional): alias of ``num_workers``.
        seed, max_episode_steps, num_threads, render_mode, from_pixels: shortcuts for the
            same ``create_env_kwargs`` entries.
        categorical_action_encoding, frame_skip, device, allow_done_after_reset: as in
            :class:`MultiThreadedEnvWrapper`.

    Raises:
        ValueError: unknown task id (close ids are suggested), a seed sequence whose length
            is not ``num_workers``, or a non-positive ``num_workers``.
        ImportError: if envpool is not installed (names the extra to install).

    Examples:
        >>> from rl_env_adapters import MultiThreadedEnv
        >>> env = MultiThreadedEnv(2, "Pendulum-v1", create_env_kwargs={"seed": 0})
        >>> data = env.rollout(5)
        >>> data.batch_size, data["next", "reward"].shape
        (torch.Size([2, 5]), torch.Size([2, 5, 1]))
    """

    def __init__(
        self,
        num_workers: int | str | None = None,
        env_name: str | int | None = None,
        *,
        create_env_kwargs: dict[str, Any] | None = None,
        num_envs: int | None = None,
        **kwargs: Any,
    ) -> None:
        if isinstance(num_workers, str):  # MultiThreadedEnv("CartPole-v1", 8)
            num_workers, env_name = env_name, num_workers
        if num_workers is None:
            num_workers = num_envs
        if not isinstance(num_workers, int) or isinstance(num_workers, bool) or num_workers < 1:
            raise ValueError(
                f"MultiThreadedEnv expected num_workers to be a positive int, got {num_workers!r}."
                " Pass e.g. MultiThreadedEnv(8, 'CartPole-v1')."
            )
        envpool = envpool_module(type(self).__name__)
        check_task_id(envpool, env_name)
        pool_kwargs = dict(create_env_kwargs or {})
        for key in _POOL_KWARGS:
            if key in kwargs:
                pool_kwargs[key] = kwargs.pop(key)
        if "seed" in pool_kwargs:
            pool_kwargs["seed"] = check_seed(pool_kwargs["seed"], num_workers)
        self.__dict__["env_name"] = env_name
        self.__dict__["num_workers"] = num_workers
        self.__dict__["create_env_kwargs"] = pool_kwargs
        super().__init__(self._make_pool(envpool, pool_kwargs), **kwargs)

    def _make_pool(self, envpool: Any, pool_kwargs: dict[str, Any]) -> Any:
        return envpool.make(
            self.env_name, env_type="gymnasium", num_envs=self.num_workers, **pool_kwargs
        )

    def _set_seed(self, seed: int | None) -> None:
        if seed is None:
            return
        kwargs = {**self.create_env_kwargs, "seed": check_seed(seed, self.num_workers)}
        self.__dict__["create_env_kwargs"] = kwargs
        self._resets.settle()
        self._env.close()
        self._set_pool(self._make_pool(envpool_module(type(self).__name__), kwargs))
