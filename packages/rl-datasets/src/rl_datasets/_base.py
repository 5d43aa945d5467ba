"""The parent class of every offline dataset: :class:`BaseDatasetExperienceReplay`.

A dataset is a :class:`~rl_replay.TensorDictReplayBuffer` over a memory-mapped TED
storage kept under ``root``.  The first use downloads the source files and converts
them once (see ``_paths`` for the on-disk layout and completion marker); later uses
load the converted files.  :meth:`preprocess` rewrites the stored dataset.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import torch
from tensordict import TensorDict, TensorDictBase

from rl_datasets import _paths
from rl_datasets._chunk_workers import default_start_method
from rl_datasets._preprocess import MemmapReader, map_rows
from rl_datasets._ted import allocate, describe, episode_ids, full_storage, split_trajectories
from rl_replay import ImmutableDatasetWriter, TensorDictReplayBuffer, TensorStorage

__all__ = ["BaseDatasetExperienceReplay"]

DOWNLOADS = ".downloads"


class BaseDatasetExperienceReplay(TensorDictReplayBuffer):
    """Parent class for offline datasets.

    Subclasses read one source's files and convert them once into TED memory-mapped
    tensors under ``<root>/<dataset_id>``; every later construction loads those files.
    The converted directory holds ``data/`` (the tensordict), ``metadata.json`` (the
    dataset id, the source URLs, sizes and the spec of every entry) and a ``.complete``
    marker written last: a directory without the marker (an interrupted download or
    conversion) is redone when ``download=True`` and refused otherwise.

    Built directly, it is a plain :class:`~rl_replay.TensorDictReplayBuffer`.

    Args:
        priority_key (NestedKey, optional): the key of the priorities. Defaults to ``"td_error"``.
        **kwargs: the keyword arguments of :class:`~rl_replay.TensorDictReplayBuffer`.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rl_replay import LazyTensorStorage
        >>> rb = BaseDatasetExperienceReplay(storage=LazyTensorStorage(4), batch_size=2)
        >>> _ = rb.extend(TensorDict({"obs": torch.zeros(4, 3)}, [4]))
        >>> rb.sample()["obs"].shape
        torch.Size([2, 3])
    """

    #: the folder of this source under the default root (``$RL_DATASETS_ROOT/<source>``)
    _source: ClassVar[str] = "datasets"
    #: the done flags whose last step is set when trajectories are split
    _done_keys: ClassVar[tuple] = (("next", "done"),)

    # ------------------------------------------------------------ paths
    @property
    def root(self) -> Path:
        """The folder holding this source's converted datasets."""
        return self._root

    @root.setter
    def root(self, value: str | Path | None) -> None:
        self._root = _paths.default_root(self._source) if value is None else Path(value)

    @property
    def data_path_root(self) -> Path:
        """Path to the converted dataset (without trajectory split)."""
        return self.root / self.dataset_id

    @property
    def data_path(self) -> Path:
        """Path to the dataset in use: with ``split_trajs``, the split copy."""
        if getattr(self, "split_trajs", False):
            return self.root / (self.dataset_id + "_split")
        return self.data_path_root

    @property
    def metadata(self) -> dict[str, Any]:
        """The ``metadata.json`` stored beside the data (id, source, sizes, spec)."""
        return self._metadata

    @metadata.setter
    def metadata(self, value: dict[str, Any]) -> None:
        self._metadata = value

    def _is_downloaded(self) -> bool:
        return _paths.is_complete(self.data_path_root)

    # ------------------------------------------------------------ opening
    def _open(
        self,
        dataset_id: str,
        *,
        root: str | Path | None,
        download: bool | str,
        split_trajs: bool = False,
        writer: Any = None,  # Any: a Writer
        **buffer_kwargs: Any,  # the TensorDictReplayBuffer keywords
    ) -> None:
        """Download and convert if needed, load, and initialise the buffer over the data."""
        owner = type(self).__name__
        if download not in (True, False, "force"):
            raise ValueError(
                f"{owner} expected download to be True, False or 'force', got {download!r}."
            )
        self.dataset_id = dataset_id
        self.root = root
        self.split_trajs = bool(split_trajs)
        path = self.data_path_root
        if download == "force":
            for stale in {path, self.data_path}:
                _paths.remove_tree(stale)
        if not _paths.is_complete(path):
            if path.exists() and not download:
                raise RuntimeError(
                    f"{owner} found {path} without its completion marker "
                    f"{_paths.MARKER!r}: a download or conversion was interrupted, so the data "
                    "cannot be trusted. Pass download=True to redo it, or download='force'."
                )
            if not download:
                raise FileNotFoundError(
                    f"{owner} found no converted dataset {dataset_id!r} in {path}, and "
                    "download=False. Pass download=True, or root= where it was converted."
                )
            if path.exists():
                warnings.warn(
                    f"{owner}: {path} has no completion marker (an interrupted run); "
                    "converting it again.",
                    stacklevel=3,
                )
            self._build(path)
        if self.split_trajs and not _paths.is_complete(self.data_path):
            self._build_split()
        self._load(buffer_kwargs, writer)

    def _build(self, path: Path) -> None:
        downloads = self.root / DOWNLOADS / self.dataset_id
        downloads.mkdir(parents=True, exist_ok=True)
        with _paths.new_workdir(path) as work:
            data, extra = self._convert(downloads, work / _paths.DATA_DIR)
            sources = extra.pop("source", [])
            size = extra.pop("download_bytes", None)
            if size is None:
                size = sum(f.stat().st_size for f in downloads.rglob("*") if f.is_file())
            _paths.write_metadata(
                work,
                {
                    "dataset_id": self.dataset_id,
                    "class": type(self).__name__,
                    "source": sources,
                    "download_bytes": size,
                    "num_transitions": int(data.batch_size.numel()),
                    "spec": describe(data),
                    **extra,
                },
            )
            del data
            _paths.publish(work, path)
        _paths.remove_tree(downloads)
        for parent in downloads.relative_to(self.root).parents:  # empty folders of the id
            folder = self.root / parent
            if folder != self.root and folder.exists() and not any(folder.iterdir()):
                folder.rmdir()

    def _build_split(self) -> None:
        source = TensorDict.load_memmap(self.data_path_root / _paths.DATA_DIR)
        meta = _paths.read_metadata(self.data_path_root, type(self).__name__)
        with _paths.new_workdir(self.data_path) as work:
            episode = self._episodes_of(source)
            out = split_trajectories(
                source, episode, work / _paths.DATA_DIR, done_keys=self._done_keys
            )
            meta.update(split_trajs=True, spec=describe(out), num_trajectories=out.shape[0])
            _paths.write_metadata(work, meta)
            del out
            _paths.publish(work, self.data_path)

    def _episodes_of(self, data: TensorDictBase) -> torch.Tensor:
        return episode_ids(data.get(("next", "done")))

    def _load(self, buffer_kwargs: dict[str, Any], writer: Any) -> None:
        path = self.data_path
        self.metadata = _paths.read_metadata(path, type(self).__name__)
        storage = self._make_storage(path / _paths.DATA_DIR)
        self._buffer_kwargs = dict(buffer_kwargs)
        self._writer_arg = writer
        super().__init__(
            storage=storage,
            writer=writer if writer is not None else ImmutableDatasetWriter(),
            **buffer_kwargs,
        )

    def _make_storage(self, data_dir: Path) -> Any:  # Any: a Storage
        return full_storage(TensorDict.load_memmap(data_dir))

    def _reader(self) -> Callable[[int, int], TensorDictBase]:
        """Reads stored rows for :meth:`preprocess` (picklable)."""
        return MemmapReader(self.data_path / _paths.DATA_DIR)

    def _convert(self, downloads: Path, dest: Path) -> tuple[TensorDictBase, dict[str, Any]]:
        """Fetch the source files into ``downloads`` and write the TED tensordict at ``dest``.

        Returns the memory-mapped tensordict and the metadata to store (with ``"source"``:
        the list of URLs, and optionally ``"download_bytes"``).
        """
        raise NotImplementedError(
            f"{type(self).__name__} is not a dataset reader: subclasses implement _convert."
        )

    def sample(self, batch_size: int | None = None, return_info: bool = False) -> Any:
        """Sample a batch (see :meth:`~rl_replay.ReplayBuffer.sample`).

        With ``split_trajs=True`` each sampled element is a padded trajectory: the batch
        is ``[batch_size, max_len]`` and ``"mask"`` marks the valid steps.
        """
        out = super().sample(batch_size, return_info=return_info)
        if not getattr(self, "split_trajs", False):
            return out
        if return_info:
            return _trajectory_batch(out[0]), out[1]
        return _trajectory_batch(out)

    # ------------------------------------------------------------ maintenance
    def preprocess(
        self,
        fn: Callable[[TensorDictBase], TensorDictBase],
        dim: int = 0,
        num_workers: int | None = None,
        *,
        chunksize: int | None = None,
        num_chunks: int | None = None,
        pool: Any = None,  # Any: accepted for API compatibility (must be None)
        generator: torch.Generator | None = None,
        max_tasks_per_child: int | None = None,
        worker_threads: int = 1,
        index_with_generator: bool = False,
        pbar: bool = False,
        mp_start_method: str | None = None,
        num_frames: int | None = None,
        dest: str | Path | None = None,
    ) -> TensorStorage:
        """Apply ``fn`` to every element of the dataset and store the result.

        ``fn`` works per element: it receives chunks of consecutive elements (a
        tensordict with one batch dim) and returns a tensordict of the same batch size.
        Its output on the first element fixes the stored entries.  The result is
        written into new memory-mapped files; with ``dest=None`` they replace the
        stored dataset once complete, so that re-creating the dataset gives the
        transformed version back (until ``download="force"``).  If ``fn`` fails, the
        stored dataset is left as it was.

        With ``num_workers=n > 1``, ``n`` processes run ``fn``: this one and ``n - 1``
        started ones (``n`` started ones when ``max_tasks_per_child`` is set), each
        claiming the next chunk when done with one.  Every process maps the stored
        files itself (copy-on-write: ``fn`` may modify its input in place) and writes
        its chunks' results straight into the new files; only chunk indices travel
        between processes.  An entry ``fn`` returns unmodified (the input's own tensor)
        is not rewritten: its file is carried over (hard-linked when the dataset is
        replaced, copied for ``dest``).

        Args:
            fn (Callable[[TensorDictBase], TensorDictBase]): the per-element transform.
            dim (int, optional): the dim along which the dataset is mapped; only ``0``.
                Defaults to ``0``.
            num_workers (int, optional): processes running ``fn``, this one included.
                Defaults to ``None`` (this process only, like ``1``).
            chunksize (int, optional): elements per task. Defaults to ``None`` (from ``num_chunks``).
            num_chunks (int, optional): number of tasks. Defaults to ``None`` (about 64k
                elements per task, at least four tasks per worker).
            pool (multiprocessing.Pool, optional): not supported: workers are started here.
                Defaults to ``None``.
            generator (torch.Generator, optional): accepted for API compatibility (the
                result does not depend on the task order). Defaults to ``None``.
            max_tasks_per_child (int, optional): chunks a started worker runs before it
                is replaced; this process then runs none. Defaults to ``None`` (no limit).
            worker_threads (int, optional): torch threads per worker. Defaults to ``1``.
            index_with_generator (bool, optional): accepted for API compatibility.
                Defaults to ``False``.
            pbar (bool, optional): show a progress bar. Defaults to ``False``.
            mp_start_method (str, optional): how workers are started (``"fork"``,
                ``"spawn"`` or ``"forkserver"``); with a method other than ``"fork"``,
                ``fn`` must be picklable. Defaults to ``None``: ``"fork"`` where it is safe
                (Linux, no CUDA context yet: the cheapest start, workers inherit ``fn``
                and the open memory maps), ``"spawn"`` otherwise.
            num_frames (int, optional): transform only the first ``num_frames`` elements
                (to try ``fn`` out). Defaults to ``None`` (all).
            dest (str or Path, optional): write the result there and leave the dataset
                unchanged. Defaults to ``None`` (replace the stored dataset).

        Returns:
            TensorStorage: a storage over the transformed data.

        Raises:
            ValueError: for ``dim != 0``, a ``pool``, a bad ``num_frames`` or an ``fn``
                that changes the batch size.
            TypeError: if ``fn`` does not return a tensordict.
        """
        owner = type(self).__name__
        if dim != 0:
            raise ValueError(f"{owner}.preprocess maps along dim 0 only, got dim={dim}.")
        total = len(self._storage)
        rows = total if num_frames is None else num_frames
        if isinstance(rows, bool) or not isinstance(rows, int) or not 0 < rows <= total:
            raise ValueError(
                f"{owner}.preprocess expected 0 < num_frames <= {total}, got {num_frames!r}."
            )
        reader = self._reader()
        example = fn(reader(0, 1).clone())
        if not isinstance(example, TensorDictBase):
            raise TypeError(
                f"{owner}.preprocess expected fn to return a tensordict, got "
                f"{type(example).__name__}. Return the (modified) input tensordict."
            )
        if example.batch_size[:1] != torch.Size([1]):
            raise ValueError(
                f"{owner}.preprocess expected fn to keep the batch size of its input, got "
                f"{tuple(example.batch_size)} for an input of batch size (1,)."
            )
        final = self.data_path if dest is None else Path(dest)
        meta = dict(self.metadata)
        with _paths.new_workdir(final) as work:
            specs = {k: (tuple(v.shape[1:]), v.dtype) for k, v in example.items(True, True)}
            allocated = allocate(work / _paths.DATA_DIR, specs, rows)
            files = {key: Path(value.filename) for key, value in allocated.items(True, True)}
            del allocated
            map_rows(
                fn,
                reader,
                work / _paths.DATA_DIR,
                rows,
                num_workers=num_workers,
                chunksize=chunksize,
                num_chunks=num_chunks,
                pool=pool,
                max_tasks_per_child=max_tasks_per_child,
                worker_threads=worker_threads,
                pbar=pbar,
                mp_start_method=(
                    default_start_method() if mp_start_method is None else mp_start_method
                ),
                dest_files=files,
                link=dest is None,
            )
            meta.update(preprocessed=True, num_transitions=rows, spec=describe(example))
            _paths.write_metadata(work, meta)
            _paths.publish(work, final)
        if dest is None:
            self._reinit()
            return self._storage
        return full_storage(TensorDict.load_memmap(final / _paths.DATA_DIR))

    def _reinit(self) -> None:
        """Rebuild the buffer over the (new) stored data, keeping its other settings."""
        transforms = [self.transform[i] for i in range(len(self.transform))]
        kwargs = {k: v for k, v in self._buffer_kwargs.items() if k != "transform"}
        self._load(kwargs, self._writer_arg)
        for transform in transforms:  # the constructor's and the appended ones, in order
            self.append_transform(transform)

    def delete(self) -> None:
        """Delete the dataset from disk (the split copy too)."""
        for path in {self.data_path, self.data_path_root}:
            _paths.remove_tree(path)


def _trajectory_batch(data: Any) -> Any:  # Any: a tensordict, or anything a transform made
    """Sampled split trajectories get the batch ``[batch, max_len]`` (the storage indexes
    dim 0 only), with ``"index"`` repeated along the steps."""
    if not isinstance(data, TensorDictBase) or data.batch_dims != 1 or "mask" not in data.keys():
        return data
    shape = data.get("mask").shape
    index = data.get("index", None)
    if index is not None and index.shape == shape[:1]:
        data.set("index", index.unsqueeze(-1).expand(shape).clone())
    data.batch_size = shape
    return data
