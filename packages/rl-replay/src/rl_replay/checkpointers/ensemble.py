"""The checkpointer of storage ensembles: :class:`StorageEnsembleCheckpointer`."""

from __future__ import annotations

from collections.abc import Callable
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
        """Restore every storage of the ensemble; on error none is changed.

        Raises:
            FileNotFoundError: if a file is missing.
            ValueError: if a file is corrupt or holds another number of storages.
        """
        self._stage(storage, Path(path))()

    def _stage(self, storage: Any, path: Path) -> Callable[[], None]:  # Any: a StorageEnsemble
        owner = type(storage).__name__
        meta = read_json(path / META_FILE, owner)
        count = meta.get("count")
        if count != len(storage._storages):
            raise ValueError(
                f"{owner}.loads expected a checkpoint of {len(storage._storages)} storages, found "
                f"{count!r} in {path / META_FILE}. Load it into an ensemble of that size."
            )
        steps = [sub._stage_loads(path / str(i)) for i, sub in enumerate(storage._storages)]

        def apply() -> None:
            for step in steps:
                step()

        return apply
