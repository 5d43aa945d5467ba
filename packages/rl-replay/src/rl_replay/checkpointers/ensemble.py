"""The checkpointer of storage ensembles: :class:`StorageEnsembleCheckpointer`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rl_replay.checkpointers._files import read_json, write_json
from rl_replay.checkpointers.base import StorageCheckpointerBase

__all__ = ["StorageEnsembleCheckpointer"]

META_FILE = "ensemble_metadata.json"


class StorageEnsembleCheckpointer(StorageCheckpointerBase):
    """Checkpointer for ensemble storages.

    Each storage of the ensemble is saved by its own checkpointer in the
    sub-directory named after its position; ``ensemble_metadata.json`` records
    how many there are.

    Raises:
        ValueError: on :meth:`loads`, if the checkpoint holds another number of storages.

    Examples:
        >>> import tempfile, torch
        >>> from rl_replay import LazyTensorStorage, ListStorage, StorageEnsemble
        >>> ensemble = StorageEnsemble(LazyTensorStorage(4), ListStorage(4))
        >>> ensemble[0].set(torch.arange(2), torch.ones(2))
        >>> ensemble[1].set(0, "text")
        >>> path = tempfile.mkdtemp()
        >>> ensemble.dumps(path)
        >>> restored = StorageEnsemble(LazyTensorStorage(4), ListStorage(4))
        >>> restored.loads(path)
        >>> len(restored[0]), restored[1].get(0)
        (2, 'text')
    """

    def dumps(self, storage: Any, path: str | Path) -> None:  # Any: a StorageEnsemble
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        for i, sub_storage in enumerate(storage._storages):
            sub_storage.dumps(path / str(i))
        write_json(
            path / META_FILE, {"type": type(storage).__name__, "count": len(storage._storages)}
        )

    def loads(self, storage: Any, path: str | Path) -> None:  # Any: a StorageEnsemble
        path = Path(path)
        owner = type(storage).__name__
        meta = read_json(path / META_FILE, owner)
        if meta.get("count") != len(storage._storages):
            raise ValueError(
                f"{owner}.loads expected a checkpoint of {len(storage._storages)} storages, found "
                f"{meta.get('count')} in {path / META_FILE}. Load it into an ensemble of that size."
            )
        for i, sub_storage in enumerate(storage._storages):
            sub_storage.loads(path / str(i))
