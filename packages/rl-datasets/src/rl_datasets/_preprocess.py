"""The engine of :meth:`BaseDatasetExperienceReplay.preprocess`: map a function over a
stored dataset, chunk by chunk, into new memory-mapped files, in worker processes.

Workers receive the function and the reader of the source through the pool's
initializer, so with the ``"fork"`` start method any function works (closures and
functions defined in ``__main__`` or a doctest included); other start methods pickle it.
Each task is a row range; a worker reads it, applies the function and writes the result
into the destination files, which every process opens by path.
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tqdm.auto import tqdm

__all__ = ["MemmapReader", "map_rows"]

_WORKER: dict[str, Any] = {}


class MemmapReader:
    """Reads rows ``[start, stop)`` of a memory-mapped tensordict directory (picklable)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._td: TensorDictBase | None = None

    def __call__(self, start: int, stop: int) -> TensorDictBase:
        if self._td is None:
            self._td = TensorDict.load_memmap(self.path)
        return self._td[start:stop]

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "_td": None}


def _init_worker(fn: Callable, reader: Callable, dest: Path, threads: int) -> None:
    torch.set_num_threads(threads)
    _WORKER.update(fn=fn, reader=reader, dest=TensorDict.load_memmap(dest))


def _run_range(bounds: tuple[int, int]) -> int:
    start, stop = bounds
    _write(_WORKER["fn"], _WORKER["reader"], _WORKER["dest"], start, stop)
    return stop - start


def _write(fn: Callable, reader: Callable, dest: TensorDictBase, start: int, stop: int) -> None:
    try:
        out = fn(reader(start, stop).clone())
        expected = set(dest.keys(True, True))
        found = set(out.keys(True, True))
        if found != expected:
            raise KeyError(
                f"preprocess expected fn to return the keys {sorted(map(str, expected))} on every "
                f"chunk (those of its output on the first element), got {sorted(map(str, found))}. "
                "Make fn return the same entries for every input."
            )
        dest[start:stop] = out
    except BaseException as err:
        err.add_note(f"preprocess: raised on rows {start}..{stop - 1}; the dataset is unchanged.")
        raise


def map_rows(
    fn: Callable[[TensorDictBase], TensorDictBase],
    reader: Callable[[int, int], TensorDictBase],
    dest: Path,
    num_rows: int,
    *,
    num_workers: int | None,
    chunksize: int | None,
    num_chunks: int | None,
    pool: Any,
    max_tasks_per_child: int | None,
    worker_threads: int,
    pbar: bool,
    mp_start_method: str | None,
) -> None:
    """Write ``fn(rows)`` for every row range of the source into the tensordict at ``dest``."""
    workers = num_workers or 1
    if chunksize is None:
        parts = num_chunks if num_chunks is not None else max(workers * 4, -(-num_rows // 65536))
        chunksize = max(1, -(-num_rows // max(1, parts)))
    ranges = [(a, min(a + chunksize, num_rows)) for a in range(0, num_rows, chunksize)]
    with tqdm(total=num_rows, unit="row", desc="preprocess", disable=not pbar) as bar:
        if pool is None and workers <= 1:
            target = TensorDict.load_memmap(dest)
            threads = torch.get_num_threads()
            # like a worker: copies between memory-mapped files slow down with more threads
            torch.set_num_threads(worker_threads)
            try:
                for start, stop in ranges:
                    _write(fn, reader, target, start, stop)
                    bar.update(stop - start)
            finally:
                torch.set_num_threads(threads)
            return
        if pool is not None:
            raise ValueError(
                "preprocess got a pool, but its workers cannot receive the dataset's reader. "
                "Pass num_workers=... (and mp_start_method) instead of pool."
            )
        ctx = mp.get_context(mp_start_method)
        with ctx.Pool(
            workers,
            initializer=_init_worker,
            initargs=(fn, reader, dest, worker_threads),
            maxtasksperchild=max_tasks_per_child,
        ) as workers_pool:
            for done in workers_pool.imap_unordered(_run_range, ranges):
                bar.update(done)
