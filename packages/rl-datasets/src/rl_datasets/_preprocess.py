"""The engine of :meth:`BaseDatasetExperienceReplay.preprocess`: map a function over a
stored dataset, chunk by chunk, into new memory-mapped files, in worker processes.

Nothing travels between processes but chunk indices (see
:mod:`rl_datasets._chunk_workers`).  Every process (the calling one works too) holds
the function and the reader of the source (inherited with the ``"fork"`` start method,
so closures and functions defined in ``__main__`` or a doctest work; pickled once per
worker otherwise), reads its chunks of rows from the source's memory maps, calls the
function once per chunk and writes its output into the destination files, which every
process opens by path.

The source is mapped copy-on-write (:class:`MemmapReader`), so reading a chunk copies
nothing and a function that modifies its input in place cannot change the stored
files.  An output entry that is the input's tensor itself, unmodified (the usual case
for a function that adds an entry), is not written at all: its source file is
hard-linked into the new dataset (or copied by the kernel) once the workers are done.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey
from tqdm.auto import tqdm

from rl_datasets._chunk_workers import run_chunks

__all__ = ["MemmapReader", "map_rows"]

_COPY_BLOCK = 64 << 20


class MemmapReader:
    """Rows ``[start, stop)`` of a memory-mapped tensordict directory (picklable).

    Every leaf file is mapped privately (``torch.from_file(shared=False)``): a chunk is
    a view of the file, read without a copy, and writes into it (a function modifying
    its input in place) stay in the process's own pages, never reaching the file.

    Examples:
        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> path = tempfile.mkdtemp()
        >>> _ = TensorDict({"obs": torch.arange(6.0).view(3, 2)}, [3]).memmap(path)
        >>> chunk = MemmapReader(path)(1, 3)
        >>> chunk["obs"].mul_(0).sum().item()  # in this process's pages only
        0.0
        >>> TensorDict.load_memmap(path)["obs"][1:].sum().item()  # the file is unchanged
        14.0
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._td: TensorDictBase | None = None
        self._files: dict[NestedKey, tuple[Path, int]] = {}

    def __call__(self, start: int, stop: int) -> TensorDictBase:
        if self._td is None:
            self._td = self._map()
        return self._td[start:stop]

    def source_file(self, key: NestedKey) -> tuple[Path, int] | None:
        """The file holding entry ``key`` row after row, and the bytes of one row."""
        if self._td is None:
            self._td = self._map()
        return self._files.get(key)

    def _map(self) -> TensorDictBase:
        stored = TensorDict.load_memmap(self.path)
        out = TensorDict({}, batch_size=stored.batch_size)
        for key, value in stored.items(True, True):
            filename = getattr(value, "filename", None)
            size = value.numel() * value.element_size()
            if (
                filename is None
                or not isinstance(value, torch.Tensor)
                or size == 0
                or os.path.getsize(filename) != size
            ):
                out.set(key, value.clone() if isinstance(value, torch.Tensor) else value)
                continue
            mapped = torch.from_file(
                str(filename), shared=False, size=value.numel(), dtype=value.dtype
            )
            out.set(key, mapped.view(value.shape))
            self._files[key] = (Path(filename), size // max(1, value.shape[0]))
        return out

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "_td": None, "_files": {}}


class _Chunks:
    """``job(i)``: write ``fn`` of chunk ``i`` into ``dest``; picklable for spawned workers.

    Returns, per entry of ``dest`` (in ``out_keys`` order), 0 when it was written, or
    ``1 + j`` when it was left unwritten because it is the reader's ``in_keys[j]``.
    """

    def __init__(
        self,
        fn: Callable,
        reader: Callable,
        dest: Path,
        ranges: list[tuple[int, int]],
        out_keys: list[NestedKey],
        in_keys: list[NestedKey],
        *,
        target: TensorDictBase | None = None,
    ) -> None:
        self.fn, self.reader, self.dest, self.ranges = fn, reader, dest, ranges
        self.out_keys, self.in_keys = out_keys, in_keys
        self._target = target

    def __call__(self, chunk: int) -> list[int]:
        if self._target is None:
            self._target = TensorDict.load_memmap(self.dest)
        same = _write(self.fn, self.reader, self._target, *self.ranges[chunk])
        return [self.in_keys.index(same[key]) + 1 if key in same else 0 for key in self.out_keys]

    def decode(self, chunk: int, result: list[int]) -> tuple[int, int, dict[NestedKey, NestedKey]]:
        start, stop = self.ranges[chunk]
        same = {k: self.in_keys[r - 1] for k, r in zip(self.out_keys, result, strict=True) if r}
        return start, stop, same

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_target": None}


def _write(
    fn: Callable, reader: Callable, dest: TensorDictBase, start: int, stop: int
) -> dict[NestedKey, NestedKey]:
    """Write ``fn(reader(start, stop))`` into rows ``[start, stop)`` of ``dest``.

    Returns ``{output key: source key}`` for the entries left unwritten because they are
    the reader's tensor of that source key, unmodified (when the reader says where its
    files are).
    """
    try:
        chunk = reader(start, stop)
        linkable = hasattr(reader, "source_file")
        # Tensor._version counts in-place writes (shared by views): the public way to
        # know that fn left an input tensor untouched without comparing its values.
        inputs = {
            id(v): (k, v, v._version)
            for k, v in (chunk.items(True, True) if linkable else ())
            if isinstance(v, torch.Tensor)
        }
        out = fn(chunk)
        expected = set(dest.keys(True, True))
        found = set(out.keys(True, True))
        if found != expected:
            raise KeyError(
                f"preprocess expected fn to return the keys {sorted(map(str, expected))} on every "
                f"chunk (those of its output on the first element), got {sorted(map(str, found))}. "
                "Make fn return the same entries for every input."
            )
        same: dict[NestedKey, NestedKey] = {}
        for key, value in out.items(True, True):
            source = inputs.get(id(value))
            if source is not None and source[1] is value and value._version == source[2]:
                same[key] = source[0]
                continue
            if tuple(value.shape[:1]) != (stop - start,):
                raise ValueError(
                    f"preprocess expected fn to keep the batch size {stop - start} of its "
                    f"input, got shape {tuple(value.shape)} for {key!r}."
                )
            dest.get(key)[start:stop] = value
        return same
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
    dest_files: dict[NestedKey, Path] | None = None,
    link: bool = False,
) -> None:
    """Write ``fn(rows)`` for every row range of the source into the tensordict at ``dest``.

    ``dest_files`` names the file of each entry of ``dest`` (read from ``dest`` if not given).
    With ``num_workers > 1`` the chunks are shared between this process and started
    workers (:func:`~rl_datasets._chunk_workers.run_chunks`).

    With ``link=True`` an unmodified source entry kept whole is hard-linked into
    ``dest`` (the caller then owns the source files no more: it replaces them);
    otherwise it is copied.
    """
    workers = num_workers or 1
    if pool is not None:
        raise ValueError(
            "preprocess got a pool, but its workers cannot receive the dataset's reader. "
            "Pass num_workers=... (and mp_start_method) instead of pool."
        )
    if chunksize is None:
        parts = num_chunks if num_chunks is not None else max(workers * 4, -(-num_rows // 65536))
        chunksize = max(1, -(-num_rows // max(1, parts)))
    ranges = [(a, min(a + chunksize, num_rows)) for a in range(0, num_rows, chunksize)]
    kept: list[tuple[int, int, dict[NestedKey, NestedKey]]] = []
    target = TensorDict.load_memmap(dest)
    if dest_files is None:
        dest_files = {key: Path(value.filename) for key, value in target.items(True, True)}
    with tqdm(total=num_rows, unit="row", desc="preprocess", disable=not pbar) as bar:
        if workers <= 1:
            threads = torch.get_num_threads()
            # like a worker: copies between memory-mapped files slow down with more threads
            torch.set_num_threads(worker_threads)
            try:
                for start, stop in ranges:
                    kept.append((start, stop, _write(fn, reader, target, start, stop)))
                    bar.update(stop - start)
            finally:
                torch.set_num_threads(threads)
        else:
            out_keys = list(target.keys(True, True))
            in_keys = list(reader(0, 1).keys(True, True))
            # forked workers inherit the open maps of target; spawned ones open dest
            job = _Chunks(fn, reader, dest, ranges, out_keys, in_keys, target=target)

            def progress(chunk: int | None) -> None:
                rows = chunksize if chunk is None else ranges[chunk][1] - ranges[chunk][0]
                bar.update(min(rows, num_rows - bar.n))

            results = run_chunks(
                job,
                len(ranges),
                len(out_keys),
                num_workers=workers,
                threads=worker_threads,
                mp_start_method=mp_start_method,
                max_tasks_per_child=max_tasks_per_child,
                progress=progress,
            )
            kept = [job.decode(i, result) for i, result in enumerate(results)]
            bar.update(num_rows - bar.n)
    del target
    _fill_kept(kept, reader, dest_files, num_rows, link=link)


def _fill_kept(
    kept: list[tuple[int, int, dict[NestedKey, NestedKey]]],
    reader: Any,  # Any: a reader with source_file (those without leave nothing unwritten)
    files: dict[NestedKey, Path],
    num_rows: int,
    *,
    link: bool,
) -> None:
    """Put the unwritten (unmodified) entries into their files from their source files."""
    parts: dict[NestedKey, list[tuple[int, int, NestedKey]]] = {}
    for start, stop, same in kept:
        for key, source in same.items():
            parts.setdefault(key, []).append((start, stop, source))
    for key, spans in parts.items():
        sources = {source for _, _, source in spans}
        whole = len(spans) == len(kept) and len(sources) == 1
        src, row_bytes = reader.source_file(spans[0][2])
        if whole and os.path.getsize(src) == num_rows * row_bytes:
            _link_or_copy(src, files[key], link=link)
            continue
        for start, stop, source in spans:
            src, row_bytes = reader.source_file(source)
            _copy_range(src, files[key], start * row_bytes, (stop - start) * row_bytes)


def _link_or_copy(src: Path, dst: Path, *, link: bool) -> None:
    dst.unlink()
    if link:
        try:
            os.link(src, dst)
            return
        except OSError:  # another file system, or links not supported: copy instead
            pass
    shutil.copyfile(src, dst)  # sendfile: the kernel copies


def _copy_range(src: Path, dst: Path, offset: int, size: int) -> None:
    """Copy ``size`` bytes at ``offset`` of ``src`` to the same place in ``dst``."""
    with open(src, "rb") as fin, open(dst, "r+b") as fout:
        done = 0
        while done < size:
            step = min(_COPY_BLOCK, size - done)
            try:  # in the kernel where the file system allows it
                n = os.copy_file_range(
                    fin.fileno(), fout.fileno(), step, offset + done, offset + done
                )
            except (AttributeError, OSError):
                n = os.pwrite(
                    fout.fileno(), os.pread(fin.fileno(), step, offset + done), offset + done
                )
            if n <= 0:
                raise OSError(f"preprocess could not copy {src} into {dst} (short copy).")
            done += n
