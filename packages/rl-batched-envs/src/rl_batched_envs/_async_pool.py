"""``AsyncEnvPool`` and its threading / multiprocessing implementations.

Each sub-env runs in its own thread or process. ``async_*_send`` starts a step or
reset of some sub-envs and returns at once; ``async_*_recv`` collects whatever
has finished (at least ``min_get`` results), tagged with ``"env_index"``. The
synchronous ``reset``/``step`` send to every (selected) sub-env and wait for all.
"""

from __future__ import annotations

import pickle
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Any

import torch
from tensordict import LazyStackedTensorDict, TensorDictBase

from rl_batched_envs._env_group import build_envs
from rl_batched_envs._errors import WorkerDiedError
from rl_batched_envs._pickling import dumps
from rl_batched_envs._selection import active_envs, reset_targets
from rl_batched_envs._stacking import check_sub_batch, stack_specs
from rl_batched_envs._worker import CALL, DEFAULT_TIMEOUT, WorkerPool, default_start_method
from rl_envs_core import EnvBase, EnvMetaData
from rl_envs_core.extension import install_stacked_specs

_STACKS = ("dense", "maybe_dense", "lazy")
_KINDS = {"step": "step_full", "reset": "reset"}


class AsyncEnvPool(EnvBase):
    """A base class for asynchronous environment pools, providing a common interface for managing multiple environments concurrently.

    ``AsyncEnvPool(..., backend=...)`` builds the implementation of the backend:
    :class:`ThreadingAsyncEnvPool` (``"threading"``) or
    :class:`ProcessorAsyncEnvPool` (``"multiprocessing"``). The pool is an env of
    batch size ``[num_envs, *sub_env.batch_size]``; its ``reset``/``step`` run
    every sub-env and wait, while ``async_step_send`` / ``async_step_recv`` and
    ``async_reset_send`` / ``async_reset_recv`` let some sub-envs run while other
    work goes on. A sub-env is addressed by ``"env_index"`` (an entry of the
    tensordict, or the ``env_index`` argument); results carry it. One command at
    a time per sub-env: receive a result before sending it another.

    Failures: an exception raised by a sub-env is re-raised by the call that
    collects it (``*_recv``, ``reset``, ``step``) with the env index in a note; the
    sub-envs that answered in the same call are idle again, so the pool stays
    usable (``reset()`` works). A sub-env silent for ``timeout`` seconds raises
    ``TimeoutError``, and a dead worker process raises
    :class:`~rl_batched_envs.WorkerDiedError`; the pool is then shut down
    (``close()`` still works; a stuck thread is left behind as a daemon thread) and
    any other call raises a ``RuntimeError`` saying to build a new pool.

    Args:
        env_makers (callable or list of callables): one factory per sub-env (a
            single callable makes one sub-env). Sub-envs may have different specs.

    Keyword Args:
        backend (str, optional): ``"threading"`` or ``"multiprocessing"``.
            Defaults to ``"threading"``.
        stack (str, optional): how results are stacked: ``"dense"``
            (``torch.stack``; the sub-envs' specs must match), ``"lazy"``
            (``LazyStackedTensorDict``) or ``"maybe_dense"`` (dense when the specs
            match). Defaults to ``"dense"``.
        create_env_kwargs (dict or list of dicts, optional): kwargs of the
            factories. Defaults to ``None``.
        timeout (float, optional): seconds to wait for a sub-env's answer (and, in
            ``close()``, for running commands to end); ``None`` waits forever.
            Defaults to ``120.0``, as :class:`ParallelEnv`.

    Raises:
        ValueError: an unknown ``backend`` or ``stack``, ``stack="dense"`` with
            sub-envs whose specs differ, or sub-envs with different batch sizes.

    Examples:
        >>> import torch
        >>> from rl_envs_core.testing import CountingEnv
        >>> env = AsyncEnvPool([CountingEnv, CountingEnv], backend="threading")
        >>> env.reset()["observation"].shape
        torch.Size([2, 1])
        >>> s = env.rand_action(env.reset())[1]
        >>> env.async_step_send(s, env_index=1)
        >>> out = env.async_step_recv()
        >>> out["env_index"], out["next", "observation"]
        (tensor([1]), tensor([[1.]]))
        >>> env.close()
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> AsyncEnvPool:  # Any: constructor args
        if cls is AsyncEnvPool:
            backend = kwargs.get("backend", "threading")
            if backend not in _BACKENDS:
                raise ValueError(
                    f"AsyncEnvPool backend must be one of {sorted(_BACKENDS)}, got {backend!r}."
                )
            cls = _BACKENDS[backend]
        return super().__new__(cls)

    def __init__(
        self,
        env_makers: Callable[..., EnvBase] | Sequence[Callable[..., EnvBase]],
        *,
        backend: str = "threading",
        stack: str = "dense",
        create_env_kwargs: dict | Sequence[dict] | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
    ) -> None:
        if timeout is not None and not timeout > 0:
            raise ValueError(
                f"AsyncEnvPool timeout must be a positive number of seconds or None, got "
                f"{timeout!r}."
            )
        if stack not in _STACKS:
            raise ValueError(f"AsyncEnvPool stack must be one of {_STACKS}, got {stack!r}.")
        makers = list(env_makers) if isinstance(env_makers, Sequence) else [env_makers]
        n = len(makers)
        if create_env_kwargs is None or isinstance(create_env_kwargs, dict):
            kwargs = [dict(create_env_kwargs or {}) for _ in range(n)]
        else:
            kwargs = [dict(k) for k in create_env_kwargs]
            if len(kwargs) != n:
                raise ValueError(
                    f"create_env_kwargs has {len(kwargs)} dicts for {n} env makers; pass "
                    f"one dict per env maker or a single dict."
                )
        self.__dict__["_busy"] = {}
        self.__dict__["_input_keys"] = None
        self.__dict__["_timeout"] = timeout
        self.__dict__["_broken"] = None
        metas = self._launch(makers, kwargs)
        try:
            self._setup(metas, backend, stack)
        except BaseException:
            self._shutdown()
            raise

    def _setup(self, metas: list[EnvMetaData], backend: str, stack: str) -> None:
        sub_batch = check_sub_batch(type(self).__name__, metas)
        specs, lazy = stack_specs(metas)
        if lazy and stack == "dense":
            raise ValueError(
                "AsyncEnvPool(stack='dense') needs sub-envs with matching specs, but "
                "their specs differ. Pass stack='lazy' or stack='maybe_dense'."
            )
        super().__init__(device=metas[0].device, batch_size=torch.Size([len(metas), *sub_batch]))
        self.backend = backend
        self.stack = stack
        self.__dict__["_lazy"] = stack == "lazy" or lazy
        install_stacked_specs(self, specs, lazy=lazy)
        self.__dict__["_last_next"] = [m.tensordict.get("next") for m in metas]
        self.__dict__["_last_root"] = [m.tensordict.exclude("next") for m in metas]

    @property
    def num_envs(self) -> int:
        """The number of sub-envs."""
        return self.batch_size[0]

    @property
    def timeout(self) -> float | None:
        """Seconds to wait for a sub-env's answer (``None``: forever)."""
        return self._timeout

    # ------------------------------------------------------------------ backend hooks
    def _launch(self, makers: list, kwargs: list[dict]) -> list[EnvMetaData]:
        """Abstract backend hook, implemented by each subclass."""
        raise NotImplementedError(f"{type(self).__name__} must implement _launch().")

    def _submit(self, kind: str, index: int, tensordict: TensorDictBase | None) -> None:
        """Abstract backend hook, implemented by each subclass."""
        raise NotImplementedError(f"{type(self).__name__} must implement _submit().")

    def _collect(self, indices: list[int], kind: str, min_get: int) -> dict[int, Any]:
        """Abstract backend hook, implemented by each subclass."""
        raise NotImplementedError(f"{type(self).__name__} must implement _collect().")

    def _call_env(self, index: int, name: str, *args: Any) -> Any:  # Any: method I/O
        """Abstract backend hook, implemented by each subclass."""
        raise NotImplementedError(f"{type(self).__name__} must implement _call_env().")

    def _shutdown(self, wait: bool = True) -> None:
        """Abstract backend hook, implemented by each subclass (``wait``: for running
        commands, up to ``timeout``)."""
        raise NotImplementedError(f"{type(self).__name__} must implement _shutdown().")

    # ------------------------------------------------------------------ helpers
    def _indices(self, tensordict: TensorDictBase | None, env_index: Any) -> list[int]:
        if env_index is None and tensordict is not None:
            env_index = tensordict.get("env_index", None)
        if env_index is None:
            raise KeyError(
                "AsyncEnvPool needs to know which env to run: set tensordict['env_index'] "
                "or pass env_index=..."
            )
        if isinstance(env_index, torch.Tensor):
            if tensordict is not None and self._batched_rows(tensordict):
                env_index = env_index.reshape(tensordict.batch_size[0], -1)[:, 0]
            else:
                env_index = env_index.reshape(-1)[:1]
            env_index = env_index.tolist()
        elif isinstance(env_index, int):
            env_index = [env_index]
        indices = [int(i) for i in env_index]
        for i in indices:
            if not 0 <= i < self.num_envs:
                raise ValueError(f"env_index must be in [0, {self.num_envs}), got {i}.")
        return indices

    def _batched_rows(self, tensordict: TensorDictBase) -> bool:
        """Whether ``tensordict`` holds several sub-envs' data (one more dim than one)."""
        return tensordict.batch_dims > len(self.batch_size) - 1

    def _rows(self, tensordict: TensorDictBase | None, count: int) -> list:
        if tensordict is None:
            return [None] * count
        tensordict = tensordict.exclude("env_index")
        if self._batched_rows(tensordict):
            return [tensordict[k] for k in range(count)]
        return [tensordict]

    def _check_usable(self) -> None:
        broken = self._broken
        if broken is not None:
            raise RuntimeError(
                f"{type(self).__name__} was shut down after a {broken} (raised earlier); "
                f"its sub-envs are gone. Build a new pool (close() on this one is still safe)."
            )

    def _fail(self, err: BaseException) -> None:
        """A sub-env hung or its worker died: shut the pool down, remember why."""
        self.__dict__["_broken"] = type(err).__name__
        self._busy.clear()
        self._shutdown(wait=False)
        self.__dict__["is_closed"] = True

    def _send(self, kind: str, tensordict: TensorDictBase | None, indices: list[int]) -> None:
        self._check_usable()
        busy = self._busy
        for i, td in zip(indices, self._rows(tensordict, len(indices))):
            if i in busy:
                raise RuntimeError(
                    f"AsyncEnvPool env {i} is still running a {busy[i]}; collect it with "
                    f"async_{busy[i]}_recv() before sending it another command."
                )
            busy[i] = kind
            try:
                self._submit(kind, i, td)
            except (TimeoutError, WorkerDiedError) as err:
                self._fail(err)
                raise

    def _recv(self, kind: str, min_get: int) -> list[tuple[int, TensorDictBase]]:
        pending = [i for i, k in self._busy.items() if k == kind]
        if len(pending) < min_get:
            raise RuntimeError(
                f"AsyncEnvPool: async_{kind}_recv(min_get={min_get}) but only "
                f"{len(pending)} {kind}(s) are running. Send them first with "
                f"async_{kind}_send()."
            )
        self._check_usable()
        try:
            results = self._collect(pending, kind, min_get)
        except (TimeoutError, WorkerDiedError) as err:
            self._fail(err)
            raise
        busy, error = self._busy, None
        for i, res in sorted(results.items()):
            del busy[i]  # answered, even with an error: the sub-env is idle again
            if isinstance(res, BaseException) and error is None:
                error = res
        if error is not None:
            del results
            try:
                raise error
            finally:  # no frame -> error -> traceback -> frame cycle keeps the pool alive
                del error
        return sorted(results.items())

    def _stack_out(self, tds: list[TensorDictBase]) -> TensorDictBase:
        if self._lazy:
            return LazyStackedTensorDict.lazy_stack(tds, 0)
        return torch.stack(tds, 0)

    def _tagged(self, results: list[tuple[int, TensorDictBase]]) -> TensorDictBase:
        tds = []
        for i, td in results:
            td = td.copy()
            td.set("env_index", torch.full(td.batch_size, i, dtype=torch.int64))
            tds.append(td)
        return self._stack_out(tds)

    # ------------------------------------------------------------------ async API
    def async_step_send(self, tensordict: TensorDictBase, env_index: Any = None) -> None:
        """Start a step of the sub-envs named by ``env_index`` (or ``tensordict["env_index"]``).

        Raises:
            KeyError: no env index given.
            RuntimeError: a named sub-env is still running a command.
        """
        self._send("step", tensordict, self._indices(tensordict, env_index))

    def async_step_recv(self, min_get: int = 1) -> TensorDictBase:
        """Wait for ``min_get`` steps and return every finished step with its ``"env_index"``."""
        return self._tagged(self._recv("step", min_get))

    def async_reset_send(
        self, tensordict: TensorDictBase | None = None, env_index: Any = None
    ) -> None:
        """Start a reset of the sub-envs named by ``env_index`` (all when none is given)."""
        if env_index is None and (tensordict is None or "env_index" not in tensordict.keys()):
            env_index = list(range(self.num_envs))
        self._send("reset", tensordict, self._indices(tensordict, env_index))

    def async_reset_recv(self, min_get: int = 1) -> TensorDictBase:
        """Wait for ``min_get`` resets and return every finished reset with its ``"env_index"``."""
        return self._tagged(self._recv("reset", min_get))

    # ------------------------------------------------------------------ sync API
    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        envs = active_envs(tensordict.get("_step", None), self.num_envs)
        envs = list(range(self.num_envs)) if envs is None else envs
        keys = self._input_keys
        if keys is None:
            keys = self.__dict__["_input_keys"] = [*self.action_keys, *self.state_keys, "_step"]
        inputs = tensordict.select(*keys, strict=False)  # only what a step reads travels
        self._send("step", _select(inputs, envs), envs)
        for i, td in self._recv("step", len(envs)):
            self._last_next[i] = td.get("next")
        return self._stack_out(self._last_next)

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        found, envs = reset_targets(tensordict, self.reset_keys, self.num_envs)
        envs = list(range(self.num_envs)) if envs is None else envs
        if not envs:
            return self._stack_out(self._last_root)
        inputs = _select(tensordict.select(*found), envs) if found else None
        self._send("reset", inputs, envs)
        for i, td in self._recv("reset", len(envs)):
            self._last_root[i] = td
        return self._stack_out(self._last_root)

    def _set_seed(self, seed: int | None) -> None:
        self.set_seed(seed)

    def set_seed(self, seed: int | None = None, static_seed: bool = False) -> int | None:
        """Seed the sub-envs in turn, each with the seed the previous one returned.

        Raises:
            RuntimeError: a sub-env is still running a command (its reply would be
                mistaken for the seed's, or the seed would race with it).
        """
        self._check_usable()
        busy = self._busy
        if busy:
            i = min(busy)
            raise RuntimeError(
                f"AsyncEnvPool.set_seed: env {i} is still running a {busy[i]}; collect it with "
                f"async_{busy[i]}_recv() first, then seed."
            )
        try:
            for i in range(self.num_envs):
                seed = self._call_env(i, "set_seed", seed, static_seed)
        except (TimeoutError, WorkerDiedError) as err:
            self._fail(err)
            raise
        return seed

    def close(self, *, raise_if_closed: bool = True) -> None:
        """Stop the threads or processes and close the sub-envs.

        Returns within ``timeout`` even when a sub-env is stuck in a command (its
        thread or process is abandoned; a thread cannot be killed and stays as a
        daemon thread). Safe to call more than once.
        """
        self._busy.clear()
        self._shutdown()
        self.__dict__["is_closed"] = True


def _select(tensordict: TensorDictBase, envs: list[int]) -> TensorDictBase:
    if len(envs) == tensordict.batch_size[0]:
        return tensordict
    return LazyStackedTensorDict.lazy_stack([tensordict[i] for i in envs], 0)


class _EnvThread:
    """One daemon thread running the commands of one sub-env, in order.

    A daemon thread (not a ``ThreadPoolExecutor`` one, which the interpreter joins at
    exit) so that a sub-env stuck forever blocks neither ``close()`` nor exit.
    """

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            fn, args, future = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args)
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)

    def submit(self, fn: Callable, *args: Any) -> Future:  # Any: the command's arguments
        future: Future = Future()
        self._queue.put((fn, args, future))
        return future

    def stop(self) -> None:
        """Ask the thread to end after the command it runs (if any)."""
        self._queue.put(None)


class ThreadingAsyncEnvPool(AsyncEnvPool):
    """An implementation of *AsyncEnvPool* using threading for parallel execution of environments.

    Each sub-env gets its own (daemon) thread; the envs are built in this thread.
    Exceptions of a sub-env are re-raised by the ``*_recv`` call that collects it,
    with the env index in a note. See :class:`AsyncEnvPool`.

    Examples:
        >>> from rl_envs_core.testing import CountingEnv
        >>> env = ThreadingAsyncEnvPool([CountingEnv] * 3)
        >>> env.rollout(4)["next", "observation"].shape
        torch.Size([3, 4, 1])
        >>> env.close()
    """

    def _launch(self, makers: list, kwargs: list[dict]) -> list[EnvMetaData]:
        envs = build_envs(makers, kwargs)
        state = self.__dict__
        state["_envs"] = envs
        state["_threads"] = [_EnvThread(f"AsyncEnvPool-{i}") for i in range(len(envs))]
        state["_futures"] = {}
        return [EnvMetaData.metadata_from_env(env) for env in envs]

    def _submit(self, kind: str, index: int, tensordict: TensorDictBase | None) -> None:
        env = self._envs[index]
        fn = env.step if kind == "step" else env.reset
        self._futures[index] = self._threads[index].submit(fn, tensordict)

    def _collect(self, indices: list[int], kind: str, min_get: int) -> dict[int, Any]:
        futures: dict[Future, int] = {self._futures[i]: i for i in indices}
        done = {f for f in futures if f.done()}
        pending = set(futures) - done
        timeout = self._timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        while len(done) < min_get:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            newly, pending = wait(pending, timeout=left, return_when=FIRST_COMPLETED)
            if not newly:
                stuck = sorted(futures[f] for f in pending)
                raise TimeoutError(
                    f"ThreadingAsyncEnvPool envs {stuck} did not finish {kind!r} within "
                    f"{timeout} s; the pool was shut down. Raise the timeout (timeout=...) "
                    f"if the envs are slow, or None to wait forever."
                )
            done |= newly
        results: dict[int, Any] = {}
        for fut in done:
            i = futures[fut]
            del self._futures[i]
            exc = fut.exception()
            if exc is not None:
                exc.add_note(f"Raised by AsyncEnvPool env {i} while running {kind!r}.")
                results[i] = exc
            else:
                results[i] = fut.result()
        return results

    def _call_env(self, index: int, name: str, *args: Any) -> Any:  # Any: method I/O
        return getattr(self._envs[index], name)(*args)

    def _shutdown(self, wait: bool = True) -> None:
        threads = self.__dict__.get("_threads")
        if not threads:
            return
        self.__dict__["_threads"] = None
        running = {i for i, future in self._futures.items() if not future.done()}
        for thread in threads:
            thread.stop()
        timeout = self._timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        for i, (env, thread) in enumerate(zip(self._envs, threads)):
            if i in running and not wait:
                continue  # stuck (the pool timed out on it): abandoned, a daemon thread
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            thread.thread.join(left)
            if not thread.thread.is_alive():  # a stuck env is still in use: left as is
                env.close()


class ProcessorAsyncEnvPool(AsyncEnvPool):
    """An implementation of *AsyncEnvPool* using multiprocessing for parallel execution of environments.

    Each sub-env lives in its own worker process (started like
    :class:`ParallelEnv`'s: in parallel, ``fork`` where safe) and data moves as
    pickled tensordicts, so sub-envs may have different specs. Worker errors,
    deaths and hangs are reported as in :class:`ParallelEnv`. See :class:`AsyncEnvPool`.

    Examples:
        >>> from rl_envs_core.testing import CountingEnv
        >>> env = ProcessorAsyncEnvPool([CountingEnv] * 2)
        >>> env.async_reset_send()
        >>> env.async_reset_recv(min_get=2)["env_index"]
        tensor([0, 1])
        >>> env.close()
    """

    def _launch(self, makers: list, kwargs: list[dict]) -> list[EnvMetaData]:
        groups = [([fn], [kw], i) for i, (fn, kw) in enumerate(zip(makers, kwargs))]
        pool = WorkerPool(
            "ProcessorAsyncEnvPool",
            groups,
            start_method=default_start_method(),
            timeout=self._timeout,
        )
        self.__dict__["_pool"] = pool
        replies = pool.recv(list(range(len(groups))), "start")
        return [pickle.loads(r)[0] for r in replies]

    def _submit(self, kind: str, index: int, tensordict: TensorDictBase | None) -> None:
        payload = CALL + dumps((_KINDS[kind], ([0], [tensordict])))
        self._pool.send([index], payload, kind)

    def _collect(self, indices: list[int], kind: str, min_get: int) -> dict[int, Any]:
        replies = self._pool.recv_outcomes(indices, kind, min_get)
        return {
            i: r if isinstance(r, BaseException) else pickle.loads(r)[0] for i, r in replies.items()
        }

    def _call_env(self, index: int, name: str, *args: Any) -> Any:  # Any: method I/O
        return self._pool.call_each([index], "call", [(name, args, {})])[0][0]

    def _shutdown(self, wait: bool = True) -> None:
        pool = self.__dict__.get("_pool")
        if pool is not None:
            pool.close()


_BACKENDS = {"threading": ThreadingAsyncEnvPool, "multiprocessing": ProcessorAsyncEnvPool}
