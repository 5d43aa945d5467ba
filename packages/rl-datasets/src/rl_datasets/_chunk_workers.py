"""Worker processes for :meth:`BaseDatasetExperienceReplay.preprocess`: chunk indices in,
nothing but a few integers out.

:func:`run_chunks` runs ``job(i)`` for every chunk ``i`` in ``num_workers`` processes:
the calling one and ``num_workers - 1`` started ones (or ``num_workers`` started ones
when ``max_tasks_per_child`` is set, since the calling process cannot be replaced).  The
calling process starts working as soon as it has started its workers, so their start
overlaps useful work instead of preceding it.

The processes share a small board in shared memory: the next chunk to claim (under a
lock: each process claims one chunk at a time, so fast processes take more), each
chunk's integer result and a semaphore counting the chunks done.  ``job`` reads and
writes the data itself (memory-mapped files), so no data goes through a pipe: only a
worker's exception does, pickled, when ``job`` raises in it.

With the ``"fork"`` start method (the default on Linux) the workers inherit ``job``
(closures and functions from ``__main__`` included) and the memory maps already open;
other start methods pickle ``job`` once per worker.
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import pickle
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = ["default_start_method", "run_chunks"]

#: seconds between two checks of the workers' health while waiting for their chunks
_POLL = 0.05


def default_start_method() -> str:
    """``"fork"`` where it is safe (Linux, no CUDA context yet): the cheapest start,
    nothing pickled or re-imported; ``"spawn"`` otherwise (macOS, where forking is
    unsafe, Windows, or a process that has initialised CUDA)."""
    if (
        sys.platform.startswith("linux")
        and "fork" in mp.get_all_start_methods()
        and not torch.cuda.is_initialized()
    ):
        return "fork"
    return "spawn"


class _Board:
    """What the processes share: the next chunk to claim, the results, the errors."""

    def __init__(self, ctx: Any, num_chunks: int, width: int) -> None:  # Any: a context
        self.num_chunks = num_chunks
        self.width = width
        self.lock = ctx.Lock()
        self.next = ctx.RawValue("q", 0)
        self.results = ctx.RawArray("i", max(1, num_chunks * width))
        self.done = ctx.Semaphore(0)
        self.errors, self.error_sink = ctx.Pipe(duplex=False)

    def claim(self) -> int | None:
        with self.lock:
            chunk = self.next.value
            if chunk >= self.num_chunks:
                return None
            self.next.value = chunk + 1
        return chunk

    def close(self) -> None:
        """No chunk can be claimed after this."""
        with self.lock:
            self.next.value = self.num_chunks

    def record(self, chunk: int, result: Sequence[int]) -> None:
        self.results[chunk * self.width : (chunk + 1) * self.width] = list(result)

    def result(self, chunk: int) -> list[int]:
        return list(self.results[chunk * self.width : (chunk + 1) * self.width])

    def report(self, worker: int, err: BaseException) -> None:
        text = "".join(traceback.format_exception(type(err), err, err.__traceback__))
        try:
            payload = pickle.dumps(err)
            pickle.loads(payload)  # an exception whose arguments do not round-trip
        except Exception:
            payload = pickle.dumps(RuntimeError(f"{type(err).__name__}: {err}"))
        self.error_sink.send((worker, payload, text))


def _work(
    job: Callable[[int], Sequence[int]],
    board: _Board,
    worker: int,
    threads: int,
    max_tasks: int | None,
) -> None:
    """A worker's life: claim a chunk, run it, record its result, until none is left."""
    gc.freeze()  # objects inherited by fork: never scanned, so never copied on write
    torch.set_num_threads(threads)
    count = 0
    while max_tasks is None or count < max_tasks:
        chunk = board.claim()
        if chunk is None:
            return
        try:
            board.record(chunk, job(chunk))
        except BaseException as err:
            board.report(worker, err)
            sys.exit(1)
        board.done.release()
        count += 1


def run_chunks(
    job: Callable[[int], Sequence[int]],
    num_chunks: int,
    width: int,
    *,
    num_workers: int,
    threads: int,
    mp_start_method: str | None,
    max_tasks_per_child: int | None,
    progress: Callable[[int | None], None],
) -> list[list[int]]:
    """Run ``job(i)`` for ``i`` in ``range(num_chunks)`` in ``num_workers`` processes.

    ``job(i)`` returns ``width`` integers; the list of every chunk's integers is returned.
    ``progress(i)`` is called in this process once it has done chunk ``i``, and
    ``progress(None)`` each time it notices that a worker has done one.

    The first exception of ``job`` (in any process) stops every worker and is raised here,
    with a note naming the worker and holding its traceback.  A worker that dies without
    an exception (killed, out of memory) is a :class:`RuntimeError`.
    """
    ctx = mp.get_context(mp_start_method)
    board = _Board(ctx, num_chunks, width)
    here = max_tasks_per_child is None
    workers: list[Any] = []  # Any: multiprocessing processes

    def start() -> None:
        process = ctx.Process(
            target=_work,
            args=(job, board, len(workers), threads, max_tasks_per_child),
            name=f"preprocess-worker-{len(workers)}",
            daemon=True,
        )
        process.start()
        workers.append(process)

    outstanding = num_chunks
    try:
        for _ in range(min(num_workers - here, num_chunks)):
            start()
        previous = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            while here and (chunk := board.claim()) is not None:
                board.record(chunk, job(chunk))
                progress(chunk)
                outstanding -= 1
                if board.errors.poll():
                    _raise_reported(board)
        finally:
            torch.set_num_threads(previous)
        _wait(board, workers, outstanding, num_workers - here, start, progress)
    except BaseException:
        board.close()
        for process in workers:
            process.terminate()
        for process in workers:
            process.join()
        raise
    # Every chunk is done, so no worker holds one: those still alive (a spawned worker
    # still importing) are stopped.  Reaping happens beside the caller's next steps
    # (a process's exit takes a while: its memory maps are torn down).
    board.close()
    for process in workers:
        if process.is_alive():
            process.terminate()
    threading.Thread(target=_reap, args=(workers,), daemon=True).start()
    return [board.result(i) for i in range(num_chunks)]


def _wait(
    board: _Board,
    workers: list[Any],  # Any: multiprocessing processes
    outstanding: int,
    num_workers: int,
    start: Callable[[], None],
    progress: Callable[[int | None], None],
) -> None:
    """Wait until the workers have done the ``outstanding`` chunks, keeping ``num_workers``
    of them alive while chunks are left."""
    while outstanding:
        if board.done.acquire(timeout=_POLL):
            outstanding -= 1
            progress(None)
            continue
        if board.errors.poll():
            _raise_reported(board)
        alive = 0
        for process in workers:
            if process.exitcode is None:
                alive += 1
            elif process.exitcode != 0:
                if board.errors.poll(_POLL):
                    _raise_reported(board)
                raise RuntimeError(
                    f"preprocess: {process.name} exited with code {process.exitcode} "
                    "(killed, or out of memory?) before its chunk was done; the dataset is "
                    "unchanged."
                )
        # a worker leaves after max_tasks_per_child chunks: replace it while some are left
        left = board.num_chunks - board.next.value  # read without the lock: a dead
        for _ in range(min(left, num_workers - alive)):  # worker may hold it
            start()


def _raise_reported(board: _Board) -> None:
    worker, payload, text = board.errors.recv()
    err = pickle.loads(payload)  # sent by our own worker process, never read from a file
    err.add_note(f"preprocess: raised in worker process {worker}; its traceback:\n{text}")
    raise err


def _reap(workers: list[Any]) -> None:  # Any: multiprocessing processes
    for process in workers:
        process.join()
