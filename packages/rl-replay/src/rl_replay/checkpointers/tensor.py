"""The default checkpointer of tensor storages: :class:`TensorStorageCheckpointer`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rl_replay.checkpointers._files import load_memmap_dir, read_json, write_json
from rl_replay.checkpointers.base import StorageCheckpointerBase

__all__ = ["TensorStorageCheckpointer"]

META_FILE = "storage_metadata.json"
DATA_DIR = "storage"


class TensorStorageCheckpointer(StorageCheckpointerBase):
    """A storage checkpointer for TensorStorages.

    Writes ``storage_metadata.json`` (type, length, shape, ndim, pytree
    structure) and the written rows as memory-mapped tensors under ``storage/``.

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
            valid.memmap(path / DATA_DIR, num_threads=0, copy_existing=True)
        write_json(path / META_FILE, meta)

    def loads(self, storage: Any, path: str | Path) -> None:  # Any: a TensorStorage
        """Restore ``storage`` from ``path``.

        Raises:
            FileNotFoundError: if a file is missing.
            ValueError: if a file is truncated, or the checkpoint does not fit ``storage``.
        """
        path = Path(path)
        owner = type(storage).__name__
        meta = read_json(path / META_FILE, owner)
        missing = {"initialized", "len", "ndim", "tree_spec"} - set(meta)
        if missing:
            raise ValueError(
                f"{owner}.loads expected the entries {sorted(missing)} in {path / META_FILE}; "
                "the file is not a tensor storage checkpoint."
            )
        content = load_memmap_dir(path / DATA_DIR, owner) if meta["initialized"] else None
        storage._load_content(content, meta)
