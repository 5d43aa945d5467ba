"""Compact checkpointers for TED data: :class:`FlatStorageCheckpointer` and
:class:`NestedStorageCheckpointer` (:class:`H5StorageCheckpointer` lives in ``h5.py``).

In TED data, ``("next", key)`` of a step is ``key`` of the step after it, except
where a trajectory ends.  The flat format keeps every root entry and, for each
such duplicated key, only the ``"next"`` values that cannot be recovered from
the following step (trajectory ends -- ``done_keys`` -- and any step whose
``"next"`` value differs from its successor, e.g. the newest one).  Loading
rebuilds ``("next", key)`` by shifting the root values one step and writing the
saved ends back, so the round trip is exact even when the assumptions about the
done state do not hold (they only cost space then).

Steps follow each other along the storage's cursor dim (dim 0, time); a full
storage wraps around.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from rl_replay._ted import (
    duplicated_keys,
    flat_to_ted,
    kept_from_nested,
    nested_from_kept,
    ted_to_flat,
    trajectory_ends,
)
from rl_replay.checkpointers._files import (
    read_json,
    read_tensordict,
    refuse_pickles,
    write_json,
    write_tensordict,
)
from rl_replay.checkpointers.base import StorageCheckpointerBase

__all__ = [
    "DATA_DIR",
    "ENDS_DIR",
    "META_FILE",
    "FlatStorageCheckpointer",
    "NestedStorageCheckpointer",
]

META_FILE = "storage_metadata.json"
DATA_DIR = "storage"
ENDS_DIR = "ends"
NEXT = "next"


def _as_tuple(key: NestedKey) -> tuple[str, ...]:
    return key if isinstance(key, tuple) else (key,)


class FlatStorageCheckpointer(StorageCheckpointerBase):
    """Saves the storage in a compact form, saving space on the TED format.

    Args:
        done_keys (list of NestedKey, optional): the entries under ``"next"`` that
            end a trajectory. Defaults to ``["done", "terminated", "truncated"]``.
        reward_keys (list of NestedKey, optional): entries that only exist under
            ``"next"`` and are never deduplicated. Defaults to ``["reward"]``.

    Examples:
        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> from rl_replay import FlatStorageCheckpointer, LazyTensorStorage
        >>> obs = torch.arange(6.0)
        >>> done = torch.tensor([False, False, True, False, False, False]).unsqueeze(-1)
        >>> data = TensorDict({"obs": obs, "next": {"obs": obs + 1, "done": done}}, [6])
        >>> storage = LazyTensorStorage(10)
        >>> storage.checkpointer = FlatStorageCheckpointer()
        >>> storage.set(torch.arange(6), data)
        >>> path = tempfile.mkdtemp()
        >>> storage.dumps(path)
        >>> restored = LazyTensorStorage(10)
        >>> restored.checkpointer = FlatStorageCheckpointer()
        >>> restored.loads(path)
        >>> restored.get(torch.arange(6))["next", "obs"].tolist()
        [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    """

    def __init__(
        self, done_keys: list[NestedKey] | None = None, reward_keys: list[NestedKey] | None = None
    ) -> None:
        self.done_keys = [_as_tuple(k) for k in (done_keys or ["done", "terminated", "truncated"])]
        self.reward_keys = [_as_tuple(k) for k in (reward_keys or ["reward"])]

    # ------------------------------------------------------------ format
    def _compress(
        self, storage: Any
    ) -> tuple[TensorDictBase, TensorDictBase, dict[str, Any]]:  # Any: TensorStorage
        meta = storage._metadata()
        rows = storage._len_along_dim0
        data = storage._storage[:rows]
        full = rows == storage.shape[0]
        kept, ends, dup = ted_to_flat(
            data, done_keys=self.done_keys, reward_keys=self.reward_keys, full=full
        )
        meta.update(format="flat", duplicated=[list(key) for key in dup], full=full)
        return kept, ends, meta

    def _duplicated_keys(self, data: TensorDictBase) -> list[tuple[str, ...]]:
        return duplicated_keys(data, self.done_keys, self.reward_keys)

    def _trajectory_ends(self, data: TensorDictBase, rows: int, full: bool) -> torch.Tensor:
        return trajectory_ends(data, self.done_keys, full)

    def _decompress(
        self, kept: TensorDictBase, ends: TensorDictBase, meta: dict[str, Any]
    ) -> TensorDictBase:
        return flat_to_ted(kept, ends, meta["duplicated"], copy=True)

    # ------------------------------------------------------------ files
    def dumps(self, storage: Any, path: str | Path) -> None:  # Any: a TensorStorage
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        if storage._storage is None:
            write_json(path / META_FILE, storage._metadata())
            return
        kept, ends, meta = self._compress(storage)
        self._write(kept, ends, path)
        write_json(path / META_FILE, meta)

    def _write(self, kept: TensorDictBase, ends: TensorDictBase, path: Path) -> None:
        write_tensordict(path / DATA_DIR, kept, type(self).__name__)
        write_tensordict(path / ENDS_DIR, ends, type(self).__name__)

    def _read(self, path: Path, owner: str) -> tuple[TensorDictBase, TensorDictBase]:
        return read_tensordict(path / DATA_DIR, owner), read_tensordict(path / ENDS_DIR, owner)

    def loads(self, storage: Any, path: str | Path) -> None:  # Any: a TensorStorage
        """Restore ``storage`` from ``path``; on error the storage is unchanged.

        Raises:
            FileNotFoundError: if a file is missing.
            ValueError: if a file is corrupt or was written in another format.
        """
        self._stage(storage, Path(path))()

    def _stage(self, storage: Any, path: Path) -> Callable[[], None]:  # Any: a TensorStorage
        owner = type(storage).__name__
        refuse_pickles(path, owner)
        meta_file = path / META_FILE
        meta = read_json(meta_file, owner)
        if not meta.get("initialized", False):
            return storage._stage_content(None, meta, str(meta_file))
        if meta.get("format") != self._format:
            raise ValueError(
                f"{type(self).__name__} expected a {self._format!r} checkpoint in {meta_file}, found "
                f"format {meta.get('format')!r}. Load it with the checkpointer that wrote it."
            )
        kept, ends = self._read(path, owner)
        try:
            data = self._decompress(kept, ends, meta)
        except (KeyError, IndexError, RuntimeError, TypeError, ValueError) as err:
            raise ValueError(
                f"{owner}.loads could not rebuild the data of {path} from {meta_file} ({err}). "
                "The checkpoint is corrupt; dump it again."
            ) from err
        return storage._stage_content(data, meta, str(meta_file))

    _format = "flat"


class NestedStorageCheckpointer(FlatStorageCheckpointer):
    """Saves the storage in a compact form, saving space on the TED format and using memory-mapped nested tensors.

    The flat format (see :class:`FlatStorageCheckpointer`) is saved as nested
    tensors: along each environment column of the storage, every item of the
    nested dim is one trajectory (cut after each done step), which makes the
    trajectories apparent on disk.

    Args:
        done_keys (list of NestedKey, optional): see :class:`FlatStorageCheckpointer`.
        reward_keys (list of NestedKey, optional): see :class:`FlatStorageCheckpointer`.
        **kwargs: accepted for API compatibility.

    Examples:
        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> from rl_replay import LazyMemmapStorage, NestedStorageCheckpointer
        >>> obs = torch.arange(5.0)
        >>> done = torch.tensor([False, True, False, False, True]).unsqueeze(-1)
        >>> storage = LazyMemmapStorage(8)
        >>> storage.checkpointer = NestedStorageCheckpointer()
        >>> storage.set(torch.arange(5), TensorDict({"obs": obs, "next": {"obs": obs + 1, "done": done}}, [5]))
        >>> path = tempfile.mkdtemp()
        >>> storage.dumps(path)
        >>> restored = LazyMemmapStorage(8)
        >>> restored.checkpointer = NestedStorageCheckpointer()
        >>> restored.loads(path)
        >>> restored.get(torch.arange(5))["next", "obs"].tolist()
        [1.0, 2.0, 3.0, 4.0, 5.0]
    """

    _format = "nested"

    def __init__(
        self,
        done_keys: list[NestedKey] | None = None,
        reward_keys: list[NestedKey] | None = None,
        **kwargs: Any,
    ) -> None:
        # kwargs: accepted for API compatibility (TorchRL forwards them to its TED converter).
        super().__init__(done_keys, reward_keys)

    def _compress(self, storage: Any) -> tuple[TensorDictBase, TensorDictBase, dict[str, Any]]:
        kept, ends, meta = super()._compress(storage)
        rows = kept.batch_size[0]
        stop = self._trajectory_ends(storage._storage[:rows], rows, meta["full"])
        nested, lengths = nested_from_kept(kept, stop)
        meta.update(format="nested", lengths=lengths)
        return nested, ends, meta

    def _decompress(
        self, kept: TensorDictBase, ends: TensorDictBase, meta: dict[str, Any]
    ) -> TensorDictBase:
        data = kept_from_nested(kept, meta["lengths"], meta["shape"])
        return super()._decompress(data, ends, meta)
