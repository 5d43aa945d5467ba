""":class:`RayCollector`: ``SyncDataCollector`` s in Ray actors, gathered by the driver.

Each actor builds a :class:`SyncDataCollector` over its envs. The driver asks every
actor for a batch (``sync=True``: one batch from all, stacked) or takes batches as
they come (``sync=False``). With a distributed replay buffer (an object with
``extend`` and ``num_shards``, such as ``rl_replay.RayReplayBuffer``), the actors
write into it themselves and only frame counts come back. Policy weights go to the
actors once per update through Ray's object store. A dead actor is restarted by
Ray and its batch asked again. Ray is imported when a collector is built.
"""

from __future__ import annotations

import importlib
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from rl_batched_envs._errors import WorkerDiedError
from rl_batched_envs.collectors._base import (
    ENDLESS,
    DataCollectorBase,
    check_total_frames,
    env_factories,
)
from rl_batched_envs.collectors._sync import SyncDataCollector

__all__ = ["RayCollector"]

RAY_EXTRA = "pip install 'rl-batched-envs[ray]'"
_RESTART_WAIT = 60.0
_GENERATION_IDS = 1_000_000  # trajectory ids a collector actor may use before a restart


def _import_ray(owner: str) -> Any:  # Any: the ray module
    try:
        return importlib.import_module("ray")
    except ImportError as err:
        raise ImportError(f"{owner} needs ray. Install it with: {RAY_EXTRA}") from err


def _pack(td: TensorDictBase) -> tuple[tuple[int, ...], dict[Any, Any]]:
    """A tensordict as numpy leaves: Ray moves those without pickling their bytes."""
    leaves = {
        key: value.detach().numpy() if value.device.type == "cpu" else value
        for key, value in td.items(True, True)
    }
    return tuple(td.batch_size), leaves


def _unpack(packed: tuple[tuple[int, ...], dict[Any, Any]]) -> TensorDict:
    batch_size, leaves = packed
    td = TensorDict(batch_size=batch_size)
    for key, value in leaves.items():
        if isinstance(value, np.ndarray):
            value = torch.from_numpy(value if value.flags.writeable else value.copy())
        td.set(key, value)
    return td


class _Args:
    """An object ref wrapped so that Ray passes it as is (not resolved) to the actor."""

    def __init__(self, ref: Any) -> None:  # Any: a ray.ObjectRef
        self.ref = ref


class CollectorWorker:
    """What runs in each Ray actor: one ``SyncDataCollector`` and its frame count."""

    def __init__(self, args: _Args, index: int, num_collectors: int) -> None:
        ray = _import_ray("RayCollector")
        create_env_fn, policy, kwargs, replay_buffer = ray.get(args.ref)
        generation = 0
        self.collector = SyncDataCollector(create_env_fn, policy, **kwargs)
        self.index, self.num_collectors = index, num_collectors
        self.set_generation(generation)
        self.replay_buffer = replay_buffer
        self.frames = 0
        # A restarted actor (same constructor arguments) waits for the driver to give it
        # a fresh generation of trajectory ids and the current weights before collecting.
        self.synced = (
            not _import_ray("RayCollector").get_runtime_context().was_current_actor_reconstructed
        )

    def set_generation(self, generation: int) -> None:
        """Trajectory ids of a restarted actor start past those of its previous lives."""
        offset = self.index + generation * _GENERATION_IDS * self.num_collectors
        self.collector._set_traj_ids(offset, self.num_collectors)
        self.synced = True

    def set_weights(self, packed: Any) -> None:  # Any: packed weights
        policy = self.collector.policy
        if isinstance(policy, torch.nn.Module):
            _unpack(packed).to_module(policy)

    def collect(self) -> tuple[Any, int, bool]:  # Any: a packed batch or None
        """``(packed batch or None, frames, restarted)``; a restarted actor collects nothing."""
        if not self.synced:
            return None, 0, True
        batch = self.collector.next()
        frames = batch.numel()
        self.frames += frames
        if self.replay_buffer is not None:
            self.replay_buffer.extend(batch)
            return None, frames, False
        return _pack(batch), frames, False

    def set_seed(self, seed: int, static_seed: bool = False) -> int | None:
        return self.collector.set_seed(seed, static_seed)

    def pid(self) -> int:

        return os.getpid()

    def stats(self) -> dict[str, Any]:
        return {"frames": self.frames, "frames_per_batch": self.collector.frames_per_batch}

    def shutdown(self) -> None:
        self.collector.shutdown()


class RayCollector(DataCollectorBase):
    """``num_collectors`` :class:`SyncDataCollector` s in Ray actors, gathered here.

    Args:
        create_env_fn (callable or list of callables): one env factory per
            collector, or one factory repeated ``num_collectors`` times. Factories
            (and the policy) travel to the actors by pickling.
        policy (callable, optional): as in :class:`SyncDataCollector`. A module's
            weights are sent with :meth:`update_policy_weights_`. Defaults to ``None``.

    Keyword Args:
        frames_per_batch (int): frames per batch: over all collectors with
            ``sync=True``, per collector with ``sync=False``.
        total_frames (int): frames in all; ``-1``: endless. Defaults to ``-1``.
        num_collectors (int, optional): the number of actors. Defaults to ``None``
            (one per factory).
        sync (bool, optional): ``True`` gathers one batch from every collector and
            stacks them (the layout of :class:`MultiSyncDataCollector`); ``False``
            yields each collector's batch as it arrives. Defaults to ``True``.
        collector_kwargs (dict, optional): other :class:`SyncDataCollector`
            keyword arguments, for every collector. Defaults to ``None``.
        replay_buffer (optional): a distributed buffer (with ``extend`` and
            ``num_shards``, e.g. ``rl_replay.RayReplayBuffer``) is written by the
            actors themselves; any other object with ``extend`` is written here.
            The iteration then yields ``None``. Defaults to ``None``.
        max_restarts (int, optional): times Ray restarts a dead collector actor
            (its batch is then asked again). Defaults to ``3``.
        address (str, optional): the cluster to join when Ray is not running yet;
            ``None`` starts a local one. Defaults to ``None``.
        ray_init_config (dict, optional): more ``ray.init`` arguments. Defaults to ``None``.
        remote_configs (dict, optional): Ray actor options of each collector.
            Defaults to ``{"num_cpus": 1}``.

    Raises:
        ImportError: if Ray is not installed.
        ValueError: bad ``frames_per_batch``, ``num_collectors`` or ``max_restarts``.
        TypeError: a ``replay_buffer`` without ``extend``.
        WorkerDiedError: a collector actor died and could not be restarted.

    Examples:
        >>> import ray
        >>> from rl_envs_core.testing import CountingEnv
        >>> _ = ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
        >>> collector = RayCollector([CountingEnv, CountingEnv], frames_per_batch=8, total_frames=16)
        >>> for data in collector:
        ...     print(data.batch_size)
        torch.Size([2, 4])
        torch.Size([2, 4])
        >>> collector.frames_per_collector
        [8, 8]
        >>> collector.shutdown()
        >>> ray.shutdown()
    """

    def __init__(
        self,
        create_env_fn: Any,  # Any: a factory or one factory per collector
        policy: Callable[[TensorDictBase], TensorDictBase] | None = None,
        *,
        frames_per_batch: int,
        total_frames: int = ENDLESS,
        num_collectors: int | None = None,
        sync: bool = True,
        collector_kwargs: dict[str, Any] | None = None,
        replay_buffer: Any = None,  # Any: duck-typed, anything with extend()
        max_restarts: int = 3,
        address: str | None = None,
        ray_init_config: dict[str, Any] | None = None,
        remote_configs: dict[str, Any] | None = None,
        postproc: Callable[[TensorDictBase], TensorDictBase] | None = None,
        split_trajs: bool | None = None,
    ) -> None:
        owner = type(self).__name__
        ray = _import_ray(owner)
        fns = env_factories(
            create_env_fn, num_collectors, owner, count_name="num_collectors", unit="collector"
        )
        n = len(fns)
        if (
            isinstance(frames_per_batch, bool)
            or not isinstance(frames_per_batch, int)
            or (frames_per_batch < 1)
        ):
            raise ValueError(
                f"{owner} expected frames_per_batch to be a positive int, got {frames_per_batch!r}."
            )
        if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < -1:
            raise ValueError(
                f"{owner} expected max_restarts to be an int >= -1, got {max_restarts!r}."
            )
        if replay_buffer is not None and not callable(getattr(replay_buffer, "extend", None)):
            raise TypeError(
                f"replay_buffer must have an extend(tensordict) method, got "
                f"{type(replay_buffer).__name__}."
            )
        self.total_frames = check_total_frames(total_frames, owner)
        self.requested_frames_per_batch = frames_per_batch
        self.sync = sync
        self.postproc = postproc
        self.split_trajs = bool(split_trajs)
        self.policy = policy
        self.max_restarts = max_restarts
        self.num_collectors = n
        distributed = replay_buffer is not None and hasattr(replay_buffer, "num_shards")
        self.replay_buffer = None if distributed else replay_buffer
        self._frames = 0
        self._iter = -1
        self._rb_checked = False
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            config = {"include_dashboard": False, "log_to_driver": False}
            config.update(ray_init_config or {})
            # "local": a new runtime even when /tmp/ray names a running cluster
            ray.init(address=address or "local", **config)
        per_collector = -(-frames_per_batch // n) if sync else frames_per_batch
        kwargs = dict(collector_kwargs or {})
        kwargs.update(frames_per_batch=per_collector, total_frames=ENDLESS)
        options = {"num_cpus": 1, **(remote_configs or {}), "max_restarts": max_restarts}
        _check_cpus(ray, n, options["num_cpus"], owner)
        remote_cls = ray.remote(CollectorWorker).options(**options)
        shared_rb = replay_buffer if distributed else None
        # The constructor arguments stay in the object store while the collector lives:
        # Ray rebuilds a restarted actor from them.
        self._args = [ray.put((fn, policy, kwargs, shared_rb)) for fn in fns]
        self._actors = [remote_cls.remote(_Args(ref), i, n) for i, ref in enumerate(self._args)]
        self._generations = [0] * n
        self._restarts = [0] * n
        self._weights_ref: Any = None
        self._pending: dict[Any, int] = {}
        self.frames_per_collector = [0] * n
        try:
            stats = [self._call(i, "stats") for i in range(n)]
        except BaseException:
            self.shutdown()
            raise
        per = [s["frames_per_batch"] for s in stats]
        self.frames_per_batch = sum(per) if sync else per[0]

    # ------------------------------------------------------------------ plumbing
    def _call(self, index: int, method: str, *args: Any) -> Any:  # Any: forwarded
        """Call an actor method and wait, restarting through a dead actor."""
        ray = _import_ray(type(self).__name__)
        while True:
            ref = getattr(self._actors[index], method).remote(*args)
            try:
                return ray.get(ref)
            except ray.exceptions.RayActorError as err:
                self._revive(index, err)
            except ray.exceptions.RayTaskError as err:
                cause = getattr(err, "cause", None)
                if isinstance(cause, BaseException):
                    raise cause.with_traceback(None) from None
                raise

    def _revive(self, index: int, err: BaseException | None) -> None:
        """Wait for Ray to restart actor ``index``, then bring it up to date."""
        ray = _import_ray(type(self).__name__)
        if getattr(err, "actor_init_failed", False):
            # its constructor raised: a restart would raise again, and the death is no crash
            raise RuntimeError(
                f"{type(self).__name__} collector {index} failed while it was built on its "
                f"Ray worker (the env factory, the policy or the collector arguments). Ray "
                f"reported:\n{err}\nA 'No module named ...' error there means the module "
                f"defining create_env_fn or the policy is not importable on the workers: "
                f"install it there, or give Ray a runtime_env with it (py_modules or "
                f"working_dir, in ray.init or in ray_init_config)."
            ) from err
        if self.max_restarts == 0 or (
            self.max_restarts > 0 and self._restarts[index] >= self.max_restarts
        ):
            raise WorkerDiedError(type(self).__name__, index, None, "collect") from err
        if err is None:
            err = RuntimeError("restarted")
        deadline = time.monotonic() + _RESTART_WAIT
        actor = self._actors[index]
        generation = self._generations[index] + 1
        while True:
            try:
                ray.get(actor.set_generation.remote(generation), timeout=_RESTART_WAIT)
                break
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                if time.monotonic() > deadline:
                    raise WorkerDiedError(type(self).__name__, index, None, "collect") from err
                time.sleep(0.05)
        self._generations[index] = generation
        self._restarts[index] += 1
        if self._weights_ref is not None:
            actor.set_weights.remote(self._weights_ref)

    def _submit(self, index: int) -> None:
        self._pending[self._actors[index].collect.remote()] = index

    def _receive(self, ref: Any, index: int) -> TensorDictBase | None:
        ray = _import_ray(type(self).__name__)
        try:
            packed, frames, restarted = ray.get(ref)
        except ray.exceptions.RayActorError as err:
            self._revive(index, err)
            packed, frames, restarted = self._call(index, "collect")
        except ray.exceptions.RayTaskError as err:
            cause = getattr(err, "cause", None)
            if isinstance(cause, BaseException):
                raise cause.with_traceback(None) from None
            raise
        while restarted:  # Ray restarted the actor between two calls
            self._revive(index, None)
            packed, frames, restarted = self._call(index, "collect")
        self.frames_per_collector[index] += frames
        return None if packed is None else _unpack(packed)

    # ------------------------------------------------------------------ iteration
    def iterator(self):
        """Yield batches until ``total_frames`` frames were collected (``None`` with a buffer)."""
        while self._frames < self.total_frames:
            self._iter += 1
            batch, frames = self._next_any()
            self._frames += frames
            yield None if batch is None else self._finish(batch)

    def next(self) -> TensorDictBase | None:
        """One batch (what the next step of the iteration gives)."""
        if self._frames >= self.total_frames:
            raise StopIteration(f"RayCollector already collected {self._frames} frames.")
        self._iter += 1
        batch, frames = self._next_any()
        self._frames += frames
        return None if batch is None else self._finish(batch)

    def _next_any(self) -> tuple[TensorDictBase | None, int]:
        before = sum(self.frames_per_collector)
        if self.sync:
            refs = {self._actors[i].collect.remote(): i for i in range(self.num_collectors)}
            batches = [self._receive(ref, i) for ref, i in refs.items()]
            batch = None if batches[0] is None else torch.stack(batches, 0)
        else:
            ray = _import_ray(type(self).__name__)
            for i in range(self.num_collectors):
                if i not in self._pending.values():
                    self._submit(i)
            [ref], _ = ray.wait(list(self._pending), num_returns=1)
            index = self._pending.pop(ref)
            batch = self._receive(ref, index)
            self._submit(index)
        return batch, sum(self.frames_per_collector) - before

    def _next_raw(self) -> TensorDictBase:
        batch, _ = self._next_any()
        return batch

    # ------------------------------------------------------------------ API
    def update_policy_weights_(
        self,
        policy_or_weights: TensorDictBase | torch.nn.Module | dict | None = None,
        **kwargs: Any,  # Any: TorchRL options (worker_ids, ...) without effect here
    ) -> None:
        """Send the policy's weights (or the given ones) to every collector actor.

        The weights are put once into Ray's object store; each actor loads them
        before its next batch.
        """
        ray = _import_ray(type(self).__name__)
        source = self.policy if policy_or_weights is None else policy_or_weights
        if isinstance(source, torch.nn.Module):
            weights = TensorDict.from_module(source)
        elif isinstance(source, TensorDictBase):
            weights = source
        elif isinstance(source, dict):
            weights = TensorDict(source).unflatten_keys(".")
        else:
            return
        self._weights_ref = ray.put(_pack(weights.detach().cpu()))
        for actor in self._actors:
            actor.set_weights.remote(self._weights_ref)

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Seed the collectors in turn, each with the seed the previous one returned."""
        for i in range(self.num_collectors):
            seed = self._call(i, "set_seed", seed, static_seed)
        return seed

    def stats(self) -> dict[str, Any]:
        """Frames collected per actor (as counted here), restarts and batch sizes."""
        return {
            "frames": self._frames,
            "frames_per_collector": list(self.frames_per_collector),
            "restarts": list(self._restarts),
            "frames_per_batch": self.frames_per_batch,
        }

    def state_dict(self) -> dict[str, Any]:  # Any: counters
        """The frame counters (the envs live in the actors)."""
        return {"collector": self._base_state(), "frames_per_collector": self.frames_per_collector}

    def load_state_dict(self, state_dict: dict[str, Any], **kwargs: Any) -> None:  # Any: counters
        """Restore what :meth:`state_dict` returned."""
        self._load_base_state(state_dict.get("collector", {}))
        self.frames_per_collector = list(state_dict.get("frames_per_collector", []))

    def actor_pids(self) -> list[int]:
        """The process id of every collector actor."""
        return [self._call(i, "pid") for i in range(self.num_collectors)]

    def shutdown(self) -> None:
        """Kill the collector actors (and the local Ray runtime if this collector started it)."""
        actors = getattr(self, "_actors", [])
        if not actors:
            return
        ray = _import_ray(type(self).__name__)
        self._pending.clear()
        for actor in actors:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # already dead, or Ray is shutting down
                pass
        self._actors = []
        self._weights_ref = None
        if self._owns_ray:
            ray.shutdown()

    def __del__(self) -> None:
        try:
            self.shutdown()
        except Exception:
            pass

    def __repr__(self) -> str:
        return (
            f"RayCollector(num_collectors={self.num_collectors}, sync={self.sync}, "
            f"frames_per_batch={self.frames_per_batch}, total_frames={self.total_frames}, "
            f"frames={self._frames})"
        )


def _check_cpus(ray: Any, num: int, per_actor: float, owner: str) -> None:  # Any: ray
    """Refuse at once what Ray would wait for forever: more CPUs than the cluster has."""
    total = ray.cluster_resources().get("CPU", 0.0)
    if num * per_actor > total:
        raise ValueError(
            f"{owner}: {num} collector actors of {per_actor} CPU each need {num * per_actor} "
            f"CPUs, the Ray cluster has {total}. Use fewer collectors, a bigger cluster, or "
            'remote_configs={"num_cpus": ...} with a smaller share.'
        )
