"""The default checkpointer of tensor storages: :class:`TensorStorageCheckpointer`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rl_replay.checkpointers._files import (
    read_json,
    read_tensordict,
    refuse_pickles,
    write_json,
    write_tensordict,
)
from rl_replay.checkpointers.base import StorageCheckpointerBase

__all__ = ["TensorStorageCheckpointer"]

META_FILE = "storage_metadata.json"
DATA_DIR = "storage"


class TensorStorageCheckpointer(StorageCheckpointerBase):
    """A storage checkpointer for TensorStorages.

    Writes ``storage_metadata.json`` (type, length, shape, ndim, pytree
    structure) and the written rows as raw tensor files with a manifest and
    one checksum per file under ``storage/``.  Loading never unpickles; it
    checks every file and metadata value before the storage is changed.

    Raises:
        TypeError: on :meth:`dumps`, for a leaf that is not a plain numeric tensor.
        FileNotFoundError: on :meth:`loads`, if a file is missing.
        ValueError: on :meth:`loads`, if a file is corrupt or does not fit the storage.

    Examples:
        >>> import tempfile, torch
        >>> from rl_replay import LazyTensorStorage
        >>> storage = LazyTensorStorage(4)
        >>> storage.set(torch.arange(2), {"x": torch.ones(2, 3)})
        >>> path = tempfile.mkdtemp()
        >>> storage.dumps(path)
        >>> restored = LazyTensorStorage(4)
        >>> restored.loads(path)
        >>> len(restored), restored[0]["x"].tolist()
        (2, [1.0, 1.0, 1.0])
    """

    def dumps(self, storage: Any, path: str | Path) -> None:  # Any: a TensorStorage
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        meta = storage._metadata()
        if storage._storage is not None:
            valid = storage._storage[: storage._len_along_dim0]  # only the rows written so far
            write_tensordict(path / DATA_DIR, valid, type(storage).__name__)
        write_json(path / META_FILE, meta)

    def loads(self, storage: Any, path: str | Path) -> None:  # Any: a TensorStorage
        """Restore ``storage`` from ``path``; on error the storage is unchanged.

        Raises:
            FileNotFoundError: if a file is missing.
            ValueError: if a file is corrupt, or the checkpoint does not fit ``storage``.
        """
        self._stage(storage, Path(path))()

    def _stage(self, storage: Any, path: Path) -> Callable[[], None]:  # Any: a TensorStorage
        """Read and check the checkpoint at ``path``; return the step that loads it."""
        owner = type(storage).__name__
        refuse_pickles(path, owner)
        meta_file = path / META_FILE
        meta = read_json(meta_file, owner)
        data_dir = path / DATA_DIR
        content = read_tensordict(data_dir, owner) if meta.get("initialized") else None
        if content is None and data_dir.exists():
            raise ValueError(
                f"{owner}.loads found the directory {data_dir} but {meta_file} describes an "
                "empty storage. The checkpoint is corrupt; dump it again."
            )
        return storage._stage_content(content, meta, str(meta_file))
