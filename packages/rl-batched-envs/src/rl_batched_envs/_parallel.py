"""``ParallelEnv``: a batch of envs run in worker processes over shared memory."""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from multiprocessing.reduction import ForkingPickler

import torch
from tensordict import TensorDictBase

from rl_batched_envs._batched import BatchedEnvBase
from rl_batched_envs._buffered import ParallelFill
from rl_batched_envs._errors import WorkerDiedError
from rl_batched_envs._layout import worker_spans
from rl_batched_envs._serial import SerialEnv
from rl_batched_envs._stacking import EnvFactory, OptionConflictError
from rl_batched_envs._worker import (
    CALL,
    DEFAULT_TIMEOUT,
    STEP,
    STEP_RESET,
    WorkerPool,
    default_start_method,
)
from rl_envs_core import EnvMetaData
from rl_envs_core.extension import key_layout, register_parallel_env_factory

_START_METHODS = ("fork", "spawn", "forkserver")
# what a one-worker ParallelEnv(serial_for_single=True) hands on to its SerialEnv
_SERIAL_KWARGS = (
    "create_env_kwargs",
    "device",
    "use_buffers",
    "num_threads",
    "share_individual_td",
)


def _schema(meta: EnvMetaData) -> list[tuple]:
    """The tensor layout of an env's specs: ``(key, class, shape, dtype)`` per leaf
    (non-tensor payloads such as a language instruction may differ between envs)."""
    return sorted(
        (str(key), type(spec).__name__, tuple(spec.shape), str(spec.dtype))
        for key, spec in meta.specs.items(include_nested=True, leaves_only=True)
    )


def _check_picklable(objects: Sequence[object], method: str) -> None:
    for obj in objects:
        try:
            pickle.dumps(obj)
        except Exception as err:
            raise TypeError(
                f"ParallelEnv(mp_start_method={method!r}) sends the env factory to the "
                f"workers by pickling it, but {obj!r} cannot be pickled ({err}). Use a "
                f"module-level function, functools.partial or EnvCreator, or "
                f"mp_start_method='fork'."
            ) from err


class ParallelEnv(BatchedEnvBase):
    """Creates one environment per process.

    Same API and results as :class:`SerialEnv` (same seeds, same data), with the
    sub-envs in worker processes. Inputs and outputs move through shared-memory
    buffers preallocated from the specs (no pickling per step), each worker
    answering a one-byte command; outputs are copied to ``device`` once per batch.
    Envs with dynamic (``-1``) or heterogeneous specs fall back to pickled
    tensordicts. ``step_and_maybe_reset`` resets done envs inside the workers.

    Process layout: ``num_envs_per_worker=1`` gives one process per sub-env. More
    busy processes than CPUs only add context switches, so by default the sub-envs
    are spread over at most one worker process per usable CPU, each running its
    share of sub-envs one after the other; the data is the same either way.
    Workers start in parallel, build their envs and report the envs' metadata (the
    main process builds no env). They use ``fork`` where it is safe (Linux, no CUDA
    context) and ``spawn`` otherwise, or ``mp_start_method``. Each worker runs
    ``num_sub_threads`` torch threads.

    Failures: an exception in a worker is re-raised here with its type, the worker
    index and its traceback. A worker that dies (e.g. killed by the OOM killer)
    raises :class:`~rl_batched_envs._errors.WorkerDiedError` naming the worker, its
    exit code or signal and the command; a worker silent for ``timeout`` seconds
    raises ``TimeoutError``. In both cases every worker is shut down and the env
    restarts on next use. ``close()`` (or garbage collection) stops the workers.

    Args:
        num_workers (int): the number of sub-envs (the leading batch dim).
        create_env_fn (callable or list of callables): builds a sub-env; see
            :class:`SerialEnv`. With ``spawn`` it must be picklable.
        create_env_kwargs (dict or list of dicts, optional): kwargs of
            ``create_env_fn``. Defaults to ``None``.

    Keyword Args:
        device (torch.device, optional): the device of the batched env's data.
            Defaults to ``None`` (the sub-envs' device).
        mp_start_method (str, optional): ``"fork"``, ``"spawn"`` or
            ``"forkserver"``. Defaults to ``None`` (fork where safe).
        use_buffers (bool, optional): use shared-memory buffers. Defaults to
            ``None`` (whenever the specs are static and stackable). Sub-envs with
            non-tensor entries (strings...) move their data pickled, even with
            ``True``: tensor buffers cannot hold those values.
        num_threads (int, optional): torch threads of the main process. Defaults
            to ``None`` (unchanged).
        num_sub_threads (int, optional): torch threads of each worker. Defaults to ``1``.
        num_envs_per_worker (int, optional): sub-envs run (serially) by each worker
            process, so that cheap envs are not dominated by inter-process
            communication; ``num_workers`` still counts sub-envs. ``1`` gives one
            process per sub-env. Defaults to ``None``: the sub-envs are split as
            evenly as possible over one worker per usable CPU (``os.sched_getaffinity``),
            or one per sub-env when there are fewer sub-envs than CPUs. The batch,
            the seeding and the data do not depend on the layout.
        timeout (float, optional): seconds to wait for a worker's answer; ``None``
            waits forever. Defaults to ``120.0``.
        share_individual_td (bool, optional): see :class:`SerialEnv`. Defaults to
            ``None``.
        serial_for_single (bool, optional): with ``num_workers=1``, build a
            :class:`SerialEnv` instead (no process for a single env; the
            process options are dropped). Defaults to ``False``.
        metadata_from_workers (bool, optional): the workers build the envs and
            report their metadata (which this env always does: the main process
            builds no env) and every worker must report the same tensor layout,
            only non-tensor payloads (e.g. a language instruction) may differ; the
            data moves pickled (it needs ``use_buffers`` unset or ``False``) and the
            workers are closed one at a time. Defaults to ``False``.
        shutdown_timeout (float, optional): seconds the workers get at ``close()``
            to close their envs and exit before they are terminated, then killed.
            Defaults to ``10.0``.

    Raises:
        ValueError: a bad ``num_workers``, ``num_envs_per_worker`` or ``mp_start_method``.
        RuntimeError: ``metadata_from_workers`` with ``use_buffers=True`` (also a
            ``ValueError``), or workers reporting different tensor layouts with
            ``metadata_from_workers``; or the error a worker raised building its env
            (every worker is closed then).
        TypeError: with ``spawn``, a factory that cannot be pickled (the message
            names it).

    Examples:
        >>> from rl_envs_core.testing import CountingEnv
        >>> with ParallelEnv(2, CountingEnv, {"max_steps": 3}) as env:
        ...     data = env.rollout(5)
        >>> data.batch_size
        torch.Size([2, 3])
        >>> data["next", "done"][:, -1].squeeze(-1)
        tensor([True, True])
    """

    def __init__(
        self,
        num_workers: int,
        create_env_fn: EnvFactory | Sequence[EnvFactory],
        create_env_kwargs: dict | Sequence[dict] | None = None,
        *,
        device: torch.device | str | None = None,
        mp_start_method: str | None = None,
        use_buffers: bool | None = None,
        num_threads: int | None = None,
        num_sub_threads: int = 1,
        num_envs_per_worker: int | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        share_individual_td: bool | None = None,
        serial_for_single: bool = False,
        metadata_from_workers: bool = False,
        shutdown_timeout: float = 10.0,
    ) -> None:
        del serial_for_single  # handled by __new__
        if metadata_from_workers:
            if use_buffers:
                raise OptionConflictError(
                    "ParallelEnv(metadata_from_workers=True) requires use_buffers=False: the "
                    "workers' data is sent pickled, as their envs may differ in non-tensor "
                    "payloads. Drop use_buffers=True."
                )
            use_buffers = False
        if mp_start_method is not None and mp_start_method not in _START_METHODS:
            raise ValueError(
                f"mp_start_method must be one of {_START_METHODS} or None, got {mp_start_method!r}."
            )
        if num_envs_per_worker is not None and (
            not isinstance(num_envs_per_worker, int) or num_envs_per_worker < 1
        ):
            raise ValueError(
                f"num_envs_per_worker must be a positive int or None, got {num_envs_per_worker!r}."
            )
        state = self.__dict__
        state["_start_method"] = mp_start_method or default_start_method()
        state["_num_sub_threads"] = num_sub_threads
        state["_envs_per_worker"] = num_envs_per_worker
        state["_timeout"] = timeout
        state["_same_schema"] = bool(metadata_from_workers)
        state["_shutdown_timeout"] = float(shutdown_timeout)
        super().__init__(
            num_workers,
            create_env_fn,
            create_env_kwargs,
            device=device,
            use_buffers=use_buffers,
            num_threads=num_threads,
            share_individual_td=share_individual_td,
        )

    def __new__(cls, *args: object, **kwargs: object) -> BatchedEnvBase:  # object: forwarded
        """``serial_for_single=True`` with one worker builds a :class:`SerialEnv`."""
        num_workers = args[0] if args else kwargs.get("num_workers")
        if kwargs.get("serial_for_single") and num_workers == 1:
            names = ("num_workers", "create_env_fn", *_SERIAL_KWARGS)
            return SerialEnv(*args, **{k: v for k, v in kwargs.items() if k in names})
        return super().__new__(cls)

    @property
    def mp_start_method(self) -> str:
        """The start method of the worker processes."""
        return self._start_method

    def worker_pids(self) -> list[int]:
        """The process ids of the running workers (empty when closed)."""
        pool = self.__dict__.get("_pool")
        return pool.pids() if pool is not None and pool.alive else []

    def _launch(self) -> list[EnvMetaData]:
        n, k = self._num_workers, self._envs_per_worker
        fns, kwargs = self._fns, self._kwargs
        method = self._start_method
        if method != "fork":
            _check_picklable([*fns, *kwargs], method)
        spans = worker_spans(n, k)
        state = self.__dict__
        state["_spans"] = spans
        state["_worker_of"] = [w for w, (s, e) in enumerate(spans) for _ in range(s, e)]
        state["_all"] = list(range(len(spans)))
        groups = [(fns[s:e], kwargs[s:e], s) for s, e in spans]
        pool = WorkerPool(
            "ParallelEnv",
            groups,
            start_method=method,
            timeout=self._timeout,
            num_threads=self._num_sub_threads,
            shutdown_timeout=self._shutdown_timeout,
            close_one_at_a_time=self._same_schema,
        )
        state["_pool"] = pool
        state["_fill_shared"] = None  # new workers: the in-place batch is shared again
        try:
            replies = self._guard(pool.recv, state["_all"], "start")
            metas = [meta for r in replies for meta in pickle.loads(r)]
            if self._same_schema:
                self._check_same_schema(metas)
        except BaseException:
            pool.close()  # the workers that did start close their envs
            raise
        return metas

    @staticmethod
    def _check_same_schema(metas: list[EnvMetaData]) -> None:
        first = _schema(metas[0])
        for i, meta in enumerate(metas[1:], 1):
            other = _schema(meta)
            if other != first:
                diff = sorted(set(first) ^ set(other))[:4]
                raise OptionConflictError(
                    f"ParallelEnv(metadata_from_workers=True): the worker metadata are "
                    f"incompatible: env 0 and env {i} report different tensor specs (they "
                    f"may differ only in non-tensor payloads); differing leaves: {diff}. "
                    f"Build envs with the same observation/action layout."
                )

    def _configure_processes(
        self,
        mp_start_method: str | None,
        num_sub_threads: int | None,
        shutdown_timeout: float | None,
    ) -> None:
        if mp_start_method is not None:
            if mp_start_method not in _START_METHODS:
                raise ValueError(
                    f"mp_start_method must be one of {_START_METHODS}, got {mp_start_method!r}."
                )
            self.__dict__["_start_method"] = mp_start_method
        if num_sub_threads is not None:
            self.__dict__["_num_sub_threads"] = num_sub_threads
        if shutdown_timeout is not None:
            self.__dict__["_shutdown_timeout"] = float(shutdown_timeout)

    def _guard(self, fn, *args):
        try:
            return fn(*args)
        except (WorkerDiedError, TimeoutError):
            self.__dict__["_running"] = False
            self.__dict__["is_closed"] = True
            raise

    def _call_each(self, name: str, args: dict[int, tuple]) -> dict:
        workers = list(args)
        results = self._guard(self._pool.call_each, workers, name, list(args.values()))
        return dict(zip(workers, results))

    def _share(self, buf: TensorDictBase) -> TensorDictBase:
        return buf.share_memory_()

    def _attach(self, buffers: tuple) -> None:
        self._guard(self._pool.attach, self._all, buffers)

    def _step_all(self) -> None:
        pool, workers = self._pool, self._all
        self._guard(pool.send, workers, STEP, "step")
        self._guard(pool.recv, workers, "step")

    def _step_reset_all(self) -> None:
        pool, workers = self._pool, self._all
        self._guard(pool.send, workers, STEP_RESET, "step_and_maybe_reset")
        self._guard(pool.recv, workers, "step_and_maybe_reset")

    def buffered_stepper(self, batch: TensorDictBase) -> ParallelFill | None:
        """Step in place (``rl_envs_core.extension.SupportsBufferedSteps``), or decline.

        The workers fill their rows of a shared-memory copy of ``batch`` at the same
        time, each sub-env through its own stepper: one message per worker per batch.
        ``None`` unless the env uses buffers and every sub-env is unbatched and has a
        stepper that accepts.
        """
        self._ensure_started()
        if not self._use_buffers:
            return None
        state = self.__dict__
        shared = state.get("_fill_shared")
        if shared is None or shared.batch_size != batch.batch_size:
            shared = batch.clone().share_memory_()
            for w in self._all:  # one pickle each: every shared handle is served only once
                payload = CALL + bytes(ForkingPickler.dumps(("attach_fill", (shared,))))
                self._guard(self._pool.send, [w], payload, "attach_fill")
            self._guard(self._pool.recv, self._all, "attach_fill")
            state["_fill_shared"] = shared
        for key in key_layout(self)["action_keys"]:
            shared.get(key).copy_(batch.get(key))
        if not all(self._guard(self._pool.call, self._all, "prepare_fill")):
            return None
        return ParallelFill(self, batch, shared)

    def _fill_workers(self, reset_last: bool) -> list:
        return self._guard(self._pool.call, self._all, "fill_batch", reset_last)

    def _shutdown(self) -> None:
        pool = self.__dict__.get("_pool")
        if pool is not None:
            pool.close()


register_parallel_env_factory(ParallelEnv)  # what GymEnv(..., num_workers=n) builds
