"""Multi-process collectors: ``MultiSyncDataCollector``, ``MultiaSyncDataCollector``, ``aSyncDataCollector``.

Each worker process runs a :class:`SyncDataCollector` over its own envs and writes
every batch in place into shared memory (see ``_process.py``); the parent copies a
batch out once before a worker may overwrite it. The sync collector owns one
shared ``[num_workers, ...]`` buffer, each worker collecting into its slice, so a
batch is one clone (``cat_results="stack"``) or one concatenation of the slices;
the async ones clone the worker's own shared batch. Per batch the parent sends one
byte to each worker and blocks on the pipes (no polling loop, no per-step work, no
weight copy unless :meth:`update_policy_weights_` is called). A worker exception,
death or silence past ``timeout`` stops every worker and raises here (the worker's
own exception type, :class:`~rl_batched_envs._errors.WorkerDiedError` or
``TimeoutError``).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_batched_envs._worker import WorkerPool, default_start_method
from rl_batched_envs.collectors._base import (
    ENDLESS,
    DataCollectorBase,
    check_options,
    check_total_frames,
    env_factories,
)
from rl_batched_envs.collectors._process import (
    COLLECT,
    OUT,
    WorkerSpec,
    copy_weights,
    pickle_batch,
    share_weights,
    start_workers,
    unpickle_batch,
)
from rl_batched_envs.collectors._sync import DEFAULT_EXPLORATION_TYPE
from rl_envs_core import ExplorationType

DEFAULT_TIMEOUT = 120.0
"""Seconds the parent waits for a worker's batch before stopping every worker."""

_START_METHODS = ("fork", "spawn", "forkserver")


class MultiCollector(DataCollectorBase):
    """Base of the multi-process collectors; ``MultiCollector(..., sync=...)`` builds one.

    ``sync=True`` builds a :class:`MultiSyncDataCollector`, ``sync=False`` a
    :class:`MultiaSyncDataCollector` (the other arguments are theirs).

    Raises:
        TypeError: ``MultiCollector`` itself called without ``sync``.

    Examples:
        >>> from rl_envs_core.testing import CountingEnv
        >>> with MultiCollector([CountingEnv], None, frames_per_batch=2, total_frames=2,
        ...                     sync=False) as collector:
        ...     print(type(collector).__name__)
        MultiaSyncDataCollector
    """

    _per_worker_frames: Callable[[int, int], int]

    def __new__(
        cls, *args: Any, sync: bool | None = None, **kwargs: Any
    ) -> MultiCollector:  # Any: forwarded
        if cls is MultiCollector:
            if sync is None:
                raise TypeError(
                    "MultiCollector(...) needs sync=True (MultiSyncDataCollector) or "
                    "sync=False (MultiaSyncDataCollector)."
                )
            cls = MultiSyncDataCollector if sync else MultiaSyncDataCollector
        return super().__new__(cls)

    def __init__(
        self,
        create_env_fn: Any,  # Any: a factory or one factory per worker
        policy: Callable[[TensorDictBase], TensorDictBase] | None = None,
        *,
        num_workers: int | None = None,
        frames_per_batch: int,
        total_frames: int = ENDLESS,
        device: torch.device | str | None = None,
        storing_device: torch.device | str | None = None,
        env_device: torch.device | str | None = None,
        policy_device: torch.device | str | None = None,
        create_env_kwargs: dict | Sequence[dict] | None = None,
        max_frames_per_traj: int | None = None,
        init_random_frames: int | None = None,
        reset_at_each_iter: bool = False,
        postproc: Callable[[TensorDictBase], TensorDictBase] | None = None,
        split_trajs: bool | None = None,
        exploration_type: ExplorationType = DEFAULT_EXPLORATION_TYPE,
        replay_buffer: Any = None,  # Any: duck-typed, anything with extend()
        trust_policy: bool | None = None,
        track_traj_ids: bool = True,
        set_truncated: bool = False,
        cat_results: str | int | None = None,
        mp_start_method: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        sync: bool | None = None,
        **kwargs: Any,  # Any: TorchRL options without effect here
    ) -> None:
        owner = type(self).__name__
        check_options(kwargs, owner)
        fns = env_factories(
            create_env_fn, num_workers, owner, count_name="num_workers", unit="worker"
        )
        n = len(fns)
        if not isinstance(frames_per_batch, int) or frames_per_batch < 1:
            raise ValueError(
                f"{owner} expected frames_per_batch to be a positive int, got {frames_per_batch!r}."
            )
        if mp_start_method is not None and mp_start_method not in _START_METHODS:
            raise ValueError(
                f"mp_start_method must be one of {_START_METHODS} or None, got {mp_start_method!r}."
            )
        if replay_buffer is not None and not callable(getattr(replay_buffer, "extend", None)):
            raise TypeError(
                f"replay_buffer must have an extend(tensordict) method, got "
                f"{type(replay_buffer).__name__}."
            )
        if cat_results is None:
            cat_results = "stack"
        if cat_results != "stack" and not isinstance(cat_results, int):
            raise ValueError(f"cat_results must be 'stack' or an int dim, got {cat_results!r}.")
        self.num_workers = n
        self.cat_results = cat_results
        self.total_frames = check_total_frames(total_frames, owner)
        self.requested_frames_per_batch = frames_per_batch
        self.postproc = postproc
        self.split_trajs = bool(split_trajs)
        self.replay_buffer = replay_buffer
        self.policy = policy
        self._frames = 0
        self._iter = -1
        self._rb_checked = False
        self._weights = share_weights(policy)
        per_worker = self._per_worker_frames(frames_per_batch, n)
        init = 0 if init_random_frames in (None, -1) else int(init_random_frames)
        env_kwargs = (
            list(create_env_kwargs)
            if isinstance(create_env_kwargs, Sequence)
            else [create_env_kwargs] * n
        )
        specs = [
            WorkerSpec(
                fn,
                policy,
                self._weights,
                dict(
                    frames_per_batch=per_worker,
                    total_frames=ENDLESS,
                    device=device,
                    storing_device=storing_device,
                    env_device=env_device,
                    policy_device=policy_device,
                    create_env_kwargs=env_kwargs[w],
                    max_frames_per_traj=max_frames_per_traj,
                    init_random_frames=math.ceil(init / n) if init else None,
                    reset_at_each_iter=reset_at_each_iter,
                    exploration_type=exploration_type,
                    trust_policy=trust_policy,
                    track_traj_ids=track_traj_ids,
                    set_truncated=set_truncated,
                ),
                n,
            )
            for w, fn in enumerate(fns)
        ]
        self._pool: WorkerPool | None = None
        self._in_flight: set[int] = set()
        self._ready: deque[TensorDictBase] = deque()
        self._pool, self._worker_frames = start_workers(
            owner,
            specs,
            start_method=mp_start_method or default_start_method(),
            timeout=timeout,
        )
        self._shared: list[TensorDictBase | None] = [None] * n
        self.frames_per_batch = self._batch_frames()

    def _batch_frames(self) -> int:
        """Frames in one delivered batch (the sync and async collectors differ)."""
        raise NotImplementedError(f"{type(self).__name__} must implement _batch_frames().")

    # ------------------------------------------------------------------ workers
    @property
    def _workers(self) -> list[int]:
        return list(range(self.num_workers))

    def _live_pool(self) -> WorkerPool:
        pool = self._pool
        if pool is None or not pool.alive:
            raise RuntimeError(
                f"{type(self).__name__} was shut down (or a worker failed); build a new one."
            )
        return pool

    def _guard(self, fn: Callable, *args: Any) -> Any:  # Any: forwarded
        """Run a pool call; on any failure stop every worker, then re-raise."""
        try:
            return fn(*args)
        except BaseException:
            self.shutdown()
            raise

    def _received(self, worker: int, reply: bytes) -> TensorDictBase:
        """The worker's shared batch (a reply carrying one replaces the previous one)."""
        if reply:
            self._shared[worker] = unpickle_batch(reply)
        shared = self._shared[worker]
        assert shared is not None  # the worker's first reply carries its batch
        return shared

    def worker_pids(self) -> list[int]:
        """The process ids of the running workers (empty when shut down)."""
        pool = self._pool
        return pool.pids() if pool is not None and pool.alive else []

    # ------------------------------------------------------------------ API
    def update_policy_weights_(
        self,
        policy_or_weights: TensorDictBase | torch.nn.Module | dict | None = None,
        **kwargs: Any,  # Any: TorchRL options (worker_ids, ...) without effect here
    ) -> None:
        """Copy the policy's weights (or the given ones) into the workers' shared weights.

        Every worker's policy reads those shared tensors, so the new weights are
        used from the workers' next step on.
        """
        if self._weights is None:
            return
        copy_weights(self._weights, self.policy if policy_or_weights is None else policy_or_weights)

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Seed the workers in turn, each with the seed the previous one returned."""
        pool = self._live_pool()
        self._drain()
        for w in self._workers:
            seed = self._guard(pool.call, [w], "set_seed", seed, static_seed)[0]
        return seed

    def state_dict(self) -> dict[str, Any]:  # Any: nested state
        """``{"worker<i>": state}`` for every worker, and the frame counters."""
        pool = self._live_pool()
        self._drain()
        states = self._guard(pool.call, self._workers, "state_dict")
        out: dict[str, Any] = {f"worker{w}": s for w, s in enumerate(states)}  # Any: nested
        out["collector"] = self._base_state()
        return out

    def load_state_dict(self, state_dict: dict[str, Any], **kwargs: Any) -> None:  # Any: nested
        """Restore what :meth:`state_dict` returned."""
        pool = self._live_pool()
        self._drain()
        for w in self._workers:
            if f"worker{w}" in state_dict:
                self._guard(pool.call, [w], "load_state_dict", state_dict[f"worker{w}"])
        self._load_base_state(state_dict.get("collector", {}))

    def reset(self, reset_idx: Sequence[bool] | None = None) -> None:
        """Reset the workers' envs (all, or where ``reset_idx`` is ``True``)."""
        pool = self._live_pool()
        workers = [w for w in self._workers if reset_idx is None or reset_idx[w]]
        self._drain()
        self._ready.clear()
        self._guard(pool.call, workers, "reset")

    def _drain(self) -> None:
        """Wait for batches still being collected (async collectors)."""

    def shutdown(self) -> None:
        """Stop every worker process; idempotent."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
        self._shared = [None] * self.num_workers

    def __del__(self) -> None:
        pool = self.__dict__.get("_pool")
        if pool is not None:
            pool.close(graceful=False)


class MultiSyncDataCollector(MultiCollector):
    """Runs a collector in each of ``num_workers`` processes and gathers one batch from all.

    Every batch holds ``frames_per_batch`` frames (split evenly over the workers,
    each share rounded up to a multiple of its env's batch), stacked along a new
    leading dim (``cat_results="stack"``, the default) or concatenated along dim
    ``cat_results``. Trajectory ids never collide between workers. The workers use
    ``fork`` where safe, else ``spawn`` (then factories and policy must pickle).

    Args:
        create_env_fn (callable or list of callables): one env factory per worker,
            or one factory repeated ``num_workers`` times.
        policy (callable, optional): as in :class:`SyncDataCollector`. A module's
            parameters and buffers are shared with the workers through shared
            memory; :meth:`update_policy_weights_` copies new weights there.
            Defaults to ``None`` (random actions).

    Keyword Args:
        num_workers (int, optional): the number of worker processes. Defaults to
            ``None`` (one per factory).
        frames_per_batch (int): frames per batch, over all workers.
        total_frames (int): frames in all; ``-1``: endless. Defaults to ``-1``.
        cat_results (str or int, optional): ``"stack"`` or the dim to concatenate
            along. Defaults to ``None`` (``"stack"``).
        mp_start_method (str, optional): ``"fork"``, ``"spawn"`` or
            ``"forkserver"``. Defaults to ``None`` (fork where safe).
        timeout (float, optional): seconds to wait for a worker's batch;
            ``None`` waits forever. Defaults to ``120.0``.
        **kwargs: the other keyword arguments of :class:`SyncDataCollector`
            (``max_frames_per_traj``, ``init_random_frames``, ``postproc``,
            ``split_trajs``, ``replay_buffer``, devices, ...).

    Raises:
        ValueError: bad ``num_workers``, ``frames_per_batch`` or start method.
        WorkerDiedError: a worker died; every worker is stopped.
        TimeoutError: a worker stayed silent past ``timeout``; every worker is stopped.

    Examples:
        >>> from functools import partial
        >>> from rl_envs_core.testing import CountingEnv
        >>> make = partial(CountingEnv, max_steps=3)
        >>> with MultiSyncDataCollector([make, make], None, frames_per_batch=8,
        ...                             total_frames=8) as collector:
        ...     for data in collector:
        ...         print(data.batch_size, data["collector", "traj_ids"][:, 0].tolist())
        torch.Size([2, 4]) [0, 1]
    """

    @staticmethod
    def _per_worker_frames(frames_per_batch: int, num_workers: int) -> int:
        return -(-frames_per_batch // num_workers)

    def _batch_frames(self) -> int:
        return sum(self._worker_frames)

    _out: TensorDictBase | None = None  # the buffer the workers collect into
    _slices: Sequence[TensorDictBase] = ()  # its per-worker views

    def _next_raw(self) -> TensorDictBase:
        pool = self._live_pool()
        workers = self._workers
        self._guard(pool.send, workers, COLLECT, "collect")
        replies = self._guard(pool.recv, workers, "collect")
        if self._out is not None and not any(replies):  # every worker wrote its slice
            return self._gather(self._out, self._slices)
        batches = [self._received(w, r) for w, r in zip(workers, replies)]
        batch = self._gather(None, batches)
        self._own(batches)
        return batch

    def _gather(
        self, out: TensorDictBase | None, slices: Sequence[TensorDictBase]
    ) -> TensorDictBase:
        """A new batch: the slices stacked (a clone of ``out``) or concatenated."""
        if self.cat_results != "stack":
            return torch.cat(slices, self.cat_results)
        return torch.stack(slices, 0) if out is None else out.clone()

    def _own(self, batches: list[TensorDictBase]) -> None:
        """Give each worker a slice of one shared buffer to collect into from now on.

        Only when the workers' batches share one layout (else each keeps its own).
        """
        self._out, self._slices = None, ()
        first = _layout(batches[0])
        if any(_layout(b) != first for b in batches[1:]):
            return
        out = torch.stack(batches, 0).share_memory_()
        slices = [out[w] for w in self._workers]
        pool = self._live_pool()
        for w, view in zip(self._workers, slices):
            self._guard(pool.send, [w], OUT + pickle_batch(view), "collect")
        self._guard(pool.recv, self._workers, "collect")
        self._out, self._slices = out, slices
        self._shared = [None] * self.num_workers

    def shutdown(self) -> None:
        """Stop every worker process; idempotent."""
        super().shutdown()
        self._out, self._slices = None, ()


def _layout(batch: TensorDictBase) -> tuple:
    """What must match for batches to stack: batch size, entries, shapes, dtypes."""
    leaves = sorted(
        (str(key), value.shape, value.dtype) for key, value in batch.items(True, True)
    )
    return batch.batch_size, leaves


class MultiaSyncDataCollector(MultiCollector):
    """Runs a collector in each of ``num_workers`` processes; yields batches as they come.

    Every worker collects batches of ``frames_per_batch`` frames, one ahead of the
    consumer; each yield is one worker's batch, whichever is ready first (its
    ``("collector", "traj_ids")`` still unique across workers). Arguments as in
    :class:`MultiSyncDataCollector` (``cat_results`` aside).

    Examples:
        >>> from functools import partial
        >>> from rl_envs_core.testing import CountingEnv
        >>> make = partial(CountingEnv, max_steps=3)
        >>> with MultiaSyncDataCollector([make, make], None, frames_per_batch=4,
        ...                              total_frames=8) as collector:
        ...     shapes = [data.batch_size for data in collector]
        >>> shapes
        [torch.Size([4]), torch.Size([4])]
    """

    @staticmethod
    def _per_worker_frames(frames_per_batch: int, num_workers: int) -> int:
        return frames_per_batch

    def _batch_frames(self) -> int:
        return self._worker_frames[0]

    def _launch(self, workers: Sequence[int]) -> None:
        pool = self._live_pool()
        self._guard(pool.send, list(workers), COLLECT, "collect")
        self._in_flight.update(workers)

    def _next_raw(self) -> TensorDictBase:
        if not self._in_flight and not self._ready:
            self._launch(self._workers)
        if not self._ready:
            pool = self._live_pool()
            waiting = sorted(self._in_flight)
            replies = self._guard(pool.recv_ready, waiting, "collect", 1)
            for w, reply in sorted(replies.items()):
                self._ready.append(self._received(w, reply).clone())
                self._in_flight.discard(w)
            self._launch(sorted(replies))
        return self._ready.popleft()

    def _drain(self) -> None:
        """Wait for the batches being collected and queue them (nothing is lost)."""
        if self._in_flight:
            pool = self._live_pool()
            waiting = sorted(self._in_flight)
            replies = self._guard(pool.recv, waiting, "collect")
            for w, reply in zip(waiting, replies):
                self._ready.append(self._received(w, reply).clone())
            self._in_flight.clear()

    def shutdown(self) -> None:
        """Stop every worker process; idempotent."""
        super().shutdown()
        self._in_flight = set()
        self._ready = deque()


class aSyncDataCollector(MultiaSyncDataCollector):
    """Runs one collector in a background process: batches are collected while you train.

    The worker collects the next batch while the previous one is being used.
    Arguments as in :class:`SyncDataCollector`, plus ``mp_start_method`` and
    ``timeout`` of :class:`MultiSyncDataCollector`.

    Examples:
        >>> from functools import partial
        >>> from rl_envs_core.testing import CountingEnv
        >>> with aSyncDataCollector(partial(CountingEnv, max_steps=3), None,
        ...                         frames_per_batch=4, total_frames=8) as collector:
        ...     print([data["observation"].squeeze(-1).tolist() for data in collector])
        [[0.0, 1.0, 2.0, 0.0], [1.0, 2.0, 0.0, 1.0]]
    """

    def __init__(
        self,
        create_env_fn: Any,  # Any: an env factory
        policy: Callable[[TensorDictBase], TensorDictBase] | None = None,
        *,
        frames_per_batch: int,
        total_frames: int = ENDLESS,
        **kwargs: Any,  # Any: see SyncDataCollector
    ) -> None:
        kwargs.pop("num_workers", None)
        super().__init__(
            [create_env_fn],
            policy,
            frames_per_batch=frames_per_batch,
            total_frames=total_frames,
            **kwargs,
        )
