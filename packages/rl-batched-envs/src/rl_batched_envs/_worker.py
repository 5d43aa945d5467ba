"""Worker processes: the loop each one runs and the parent-side ``WorkerPool``.

Each worker owns an :class:`EnvGroup`. The parent talks to it over one pipe:
a one-byte command for the hot paths (the data itself moves through shared-memory
buffers) and a pickled ``(method, args)`` message for everything else. The parent
waits on the pipes *and* on the process sentinels, so a worker that dies is
noticed at once (never a hang or a bare ``EOFError``), and a worker that stays
silent past ``timeout`` seconds is shut down with a ``TimeoutError``.
"""

from __future__ import annotations

import gc
import math
import os
import pickle
import select
import signal
import time
import traceback
import weakref
from collections.abc import Callable, Sequence
from multiprocessing import connection
from multiprocessing.reduction import ForkingPickler
from typing import Any

import torch
import torch.multiprocessing as mp

from rl_batched_envs._env_group import EnvGroup, build_envs
from rl_batched_envs._errors import WorkerDiedError, decode_exception, encode_exception
from rl_batched_envs._pickling import dumps

STEP = b"s"  # step every env of the group, data in the buffers
STEP_RESET = b"m"  # step_and_maybe_reset every env of the group
CALL = b"x"  # pickled (method name, args) for the group
ATTACH = b"a"  # the shared buffers, pickled with ForkingPickler
CLOSE = b"c"
OK = b"k"
ERR = b"e"

_COMMAND_NAMES = {STEP: "step", STEP_RESET: "step_and_maybe_reset", CLOSE: "close"}
_CLOSE_WAIT_S = 2.0

DEFAULT_TIMEOUT = 120.0
"""Seconds the main process waits for a worker's (or a pool thread's) reply by default."""


def worker_main(
    index: int,
    conn: connection.Connection,
    fns: Sequence[Callable],
    kwargs: Sequence[dict],
    offset: int,
    owner: str,
    inherited: Sequence[connection.Connection],
    num_threads: int,
) -> None:
    """Run one worker: build the envs, report their metadata, serve commands."""
    gc.freeze()  # objects inherited by fork: never scanned, so never copied on write
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for other in inherited:  # parent-side pipe ends copied by fork (its own included)
        other.close()
    torch.set_num_threads(num_threads)
    try:
        group = EnvGroup(build_envs(fns, kwargs), offset=offset, owner=owner)
        conn.send_bytes(OK + dumps(group.metadata()))
    except BaseException as exc:
        conn.send_bytes(ERR + encode_exception(exc, traceback.format_exc()))
        try:  # stay until the parent closes, so that only a crash ends a worker early
            conn.recv_bytes()
        except (EOFError, OSError):
            pass
        return
    step, step_reset = group.step, group.step_and_reset_done
    while True:
        try:
            msg = conn.recv_bytes()
        except (EOFError, OSError):  # the parent is gone
            break
        code = msg[:1]
        try:
            if code == STEP:
                step(None)
                reply = OK
            elif code == STEP_RESET:
                step_reset(None)
                reply = OK
            elif code == CALL:
                name, args = pickle.loads(msg[1:])
                reply = OK + dumps(getattr(group, name)(*args))
            elif code == ATTACH:
                group.attach(*pickle.loads(msg[1:]))
                reply = OK
            else:
                group.close()
                conn.send_bytes(OK)
                break
        except BaseException as exc:
            reply = ERR + encode_exception(exc, traceback.format_exc())
        conn.send_bytes(reply)
    conn.close()


def _shutdown(
    processes: list,
    conns: list,
    graceful: bool,
    wait_s: float = _CLOSE_WAIT_S,
    one_at_a_time: bool = False,
) -> None:
    """Stop every worker (close message, then SIGTERM, then SIGKILL) and close the pipes.

    ``wait_s`` is the grace period for the workers to close their envs and exit;
    ``one_at_a_time`` closes them in turn, each with its own grace period.
    """
    if graceful:
        batches = [[p] for p in range(len(processes))] if one_at_a_time else [range(len(processes))]
        for batch in batches:
            for w in batch:
                if processes[w].is_alive():
                    try:
                        conns[w].send_bytes(CLOSE)
                    except OSError:
                        pass
            deadline = time.monotonic() + wait_s
            for w in batch:
                processes[w].join(max(0.0, deadline - time.monotonic()))
    for proc in processes:
        if proc.is_alive():
            proc.terminate()
    for proc in processes:
        proc.join(1.0)
        if proc.is_alive():
            proc.kill()
            proc.join(1.0)
    for conn in conns:
        conn.close()
    for proc in processes:
        if proc.exitcode is not None:
            proc.close()
    processes.clear()
    conns.clear()


def default_start_method() -> str:
    """``fork`` where safe (Linux, no CUDA context yet), ``spawn`` otherwise."""
    methods = mp.get_all_start_methods()
    if "fork" in methods and os.name == "posix" and not torch.cuda.is_initialized():
        return "fork"
    return "spawn"


class WorkerPool:
    """Processes running :func:`worker_main`, with death and timeout detection.

    Args:
        owner: the class name used in messages.
        groups: one ``(create_env_fns, create_env_kwargs, offset)`` per worker.
        start_method: ``"fork"``, ``"spawn"`` or ``"forkserver"``.
        timeout: seconds to wait for a worker's reply (``None``: forever).
        num_threads: torch threads in each worker.
        shutdown_timeout: seconds the workers get to close their envs and exit at
            ``close()`` before they are terminated.
        close_one_at_a_time: close the workers in turn (each with its own grace
            period) rather than all at once.
    """

    def __init__(
        self,
        owner: str,
        groups: Sequence[tuple[Sequence[Callable], Sequence[dict], int]],
        *,
        start_method: str,
        timeout: float | None,
        num_threads: int = 1,
        shutdown_timeout: float = _CLOSE_WAIT_S,
        close_one_at_a_time: bool = False,
    ) -> None:
        self.owner = owner
        self.timeout = timeout
        self._poller = None
        self.processes: list = []
        self.conns: list[connection.Connection] = []
        # replies each worker still owes: a receive cut short (Ctrl-C in the middle of
        # a step) leaves one unread, and the next command must not take it for its own
        self.owed: list[int] = []
        self._closing = (float(shutdown_timeout), bool(close_one_at_a_time))
        self._finalizer = weakref.finalize(
            self, _shutdown, self.processes, self.conns, True, *self._closing
        )
        self.start_method = start_method
        for fns, kwargs, offset in groups:
            self.start_worker(
                worker_main,
                lambda inherited, f=fns, k=kwargs, o=offset: (
                    f,
                    k,
                    o,
                    owner,
                    inherited,
                    num_threads,
                ),
                daemon=True,
                what=f"the env factory {fns[0]!r}",
            )

    def start_worker(
        self,
        target: Callable[..., None],
        make_args: Callable[[list], tuple],
        *,
        daemon: bool,
        what: str,
    ) -> None:
        """Start one more worker process running ``target(index, child_conn, *args)``.

        ``make_args(inherited)`` builds the other arguments; ``inherited`` lists the
        parent-side connections (of the workers already started and of this one), which
        a forked child closes.

        Raises:
            TypeError: if the process cannot start (``what`` names what must be picklable);
                the whole pool is closed then.
        """
        index = len(self.conns)
        ctx = mp.get_context(self.start_method)
        parent, child = ctx.Pipe()
        # a forked child gets copies of every pipe end the parent holds, its own parent
        # end included: it closes them, so that the parent's death reads as EOF there
        inherited = [*self.conns, parent] if self.start_method == "fork" else []
        proc = ctx.Process(
            target=target,
            args=(index, child, *make_args(inherited)),
            name=f"{self.owner}-worker-{index}",
            daemon=daemon,
        )
        try:
            proc.start()
        except Exception as exc:
            child.close()
            parent.close()
            self.close(graceful=False)
            raise TypeError(
                f"{self.owner} could not start worker {index} with start method "
                f"{self.start_method!r}: {exc}. With 'spawn' {what} must be picklable: use a "
                "module-level function, functools.partial or EnvCreator."
            ) from exc
        child.close()
        self.processes.append(proc)
        self.conns.append(parent)
        self.owed.append(1)  # a worker reports once started

    @property
    def num_workers(self) -> int:
        """The number of worker processes."""
        return len(self.conns)

    @property
    def alive(self) -> bool:
        """Whether the workers are running."""
        return bool(self.conns)

    def pids(self) -> list[int]:
        """The process ids of the workers."""
        return [proc.pid for proc in self.processes]

    # ------------------------------------------------------------------ messaging
    def send(self, workers: Sequence[int], payload: bytes, command: str) -> None:
        """Send ``payload`` to each of ``workers``."""
        conns, owed = self.conns, self.owed
        for w in workers:
            if owed[w]:
                self._settle(w, command)
            try:
                conns[w].send_bytes(payload)
            except OSError:
                self._died(w, command)
            owed[w] += 1

    def _settle(self, worker: int, command: str) -> None:
        """Read and drop the replies ``worker`` owes for commands whose wait was cut short.

        They answer commands the caller gave up on (a ``KeyboardInterrupt`` during a
        step, say): the worker finished them, their data was overwritten or never read.
        """
        while self.owed[worker]:
            self.recv_outcomes([worker], command, 1)

    def call(self, workers: Sequence[int], name: str, *args: Any) -> list[Any]:  # Any: results
        """Run ``EnvGroup.<name>(*args)`` in ``workers``; return their results in order."""
        self.send(workers, CALL + dumps((name, args)), name)
        return [pickle.loads(r) for r in self.recv(workers, name)]

    def call_each(self, workers: Sequence[int], name: str, args: Sequence[tuple]) -> list[Any]:
        """Like :meth:`call`, with one argument tuple per worker."""
        for w, a in zip(workers, args):
            self.send([w], CALL + dumps((name, a)), name)
        return [pickle.loads(r) for r in self.recv(workers, name)]

    def attach(self, workers: Sequence[int], buffers: tuple) -> None:
        """Hand the shared-memory buffers to the workers."""
        for w in workers:  # one pickle each: every shared handle is served only once
            self.send([w], ATTACH + bytes(ForkingPickler.dumps(buffers)), "attach")
        self.recv(workers, "attach")

    def recv(self, workers: Sequence[int], command: str) -> list[bytes]:
        """Wait for one reply from each of ``workers``; raise the first worker error."""
        replies = self.recv_ready(workers, command, len(workers))
        return [replies[w] for w in workers]

    def recv_ready(self, workers: Sequence[int], command: str, min_get: int) -> dict[int, bytes]:
        """Wait until ``min_get`` of ``workers`` replied; return every reply ready by then.

        Raises:
            WorkerDiedError: a worker died; every worker is shut down.
            TimeoutError: no reply within ``timeout``; every worker is shut down.
            Exception: the error a worker raised (the lowest failing worker's); the
                other workers keep running.
        """
        replies = self.recv_outcomes(workers, command, min_get)
        failed = [w for w, r in replies.items() if isinstance(r, BaseException)]
        if failed:
            error = replies[min(failed)]
            del replies
            try:
                raise error
            finally:  # no frame -> error -> traceback -> frame cycle keeps the pool alive
                del error
        return replies

    def recv_outcomes(
        self, workers: Sequence[int], command: str, min_get: int
    ) -> dict[int, bytes | BaseException]:
        """Like :meth:`recv_ready`, with a worker's error returned in place of its reply.

        Every reply read is returned, so the caller knows which workers are idle again
        even when some of them failed.

        Raises:
            WorkerDiedError: a worker died; every worker is shut down.
            TimeoutError: no reply within ``timeout``; every worker is shut down.
        """
        conns, procs = self.conns, self.processes
        every = len(workers) == len(conns)  # then one poller registered once serves
        waiting = {}
        if not every:
            for w in workers:
                waiting[conns[w]] = w
                waiting[procs[w].sentinel] = w
        replies: dict[int, bytes | BaseException] = {}
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        while len(replies) < min_get:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = self._poll(left) if every else self._wait(waiting, left)
            if not ready:
                self._timed_out([w for w in workers if w not in replies], command)
            for w, is_conn in ready:
                conn = conns[w]
                if w in replies:  # a worker that already answered shows up: it died
                    if not is_conn:
                        self._died(w, command)
                    continue
                if not is_conn and not conn.poll():
                    self._died(w, command)
                try:
                    msg = conn.recv_bytes()
                except (EOFError, OSError):
                    self._died(w, command)
                self.owed[w] -= 1
                if msg[:1] == ERR:
                    replies[w] = decode_exception(msg[1:], self.owner, w, command)
                else:
                    replies[w] = msg[1:]
                if waiting:
                    del waiting[conn]
                    del waiting[procs[w].sentinel]
        return replies

    def _wait(self, waiting: dict, left: float | None) -> list[tuple[int, bool]]:
        """Ready ``(worker, is_pipe)`` among ``waiting`` (pipes and sentinels)."""
        conns = self.conns
        return [(waiting[o], o is conns[waiting[o]]) for o in connection.wait(list(waiting), left)]

    def _poll(self, left: float | None) -> list[tuple[int, bool]]:
        """Ready ``(worker, is_pipe)`` among all workers, through one persistent poller."""
        if self._poller is None:
            if not hasattr(select, "poll"):
                waiting = {}
                for w, (conn, proc) in enumerate(zip(self.conns, self.processes)):
                    waiting[conn] = w
                    waiting[proc.sentinel] = w
                return self._wait(waiting, left)
            poller, fds = select.poll(), {}
            for w, (conn, proc) in enumerate(zip(self.conns, self.processes)):
                for fd, is_conn in ((conn.fileno(), True), (proc.sentinel, False)):
                    poller.register(fd, select.POLLIN)
                    fds[fd] = (w, is_conn)
            self._poller = (poller, fds)
        poller, fds = self._poller
        events = poller.poll(None if left is None else math.ceil(left * 1000))
        return [fds[fd] for fd, _ in events]

    def _died(self, worker: int, command: str) -> None:
        proc = self.processes[worker]
        proc.join(1.0)
        exitcode = proc.exitcode
        self.close(graceful=False)
        raise WorkerDiedError(self.owner, worker, exitcode, _COMMAND_NAMES.get(command, command))

    def _timed_out(self, workers: list[int], command: str) -> None:
        self.close(graceful=False)
        raise TimeoutError(
            f"{self.owner} workers {workers} did not answer {command!r} within "
            f"{self.timeout} s; they were shut down and the env is closed. Raise the "
            f"timeout (timeout=...) if the envs are slow, or None to wait forever."
        )

    def close(self, graceful: bool = True) -> None:
        """Stop every worker; idempotent."""
        self._finalizer.detach()
        self._poller = None
        _shutdown(self.processes, self.conns, graceful, *self._closing)
        self.owed.clear()
