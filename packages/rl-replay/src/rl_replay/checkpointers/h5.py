"""The HDF5 checkpointer :class:`H5StorageCheckpointer` (needs h5py: the ``h5`` extra).

h5py is imported when the checkpointer is built, never by ``import rl_replay``.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from rl_replay._ted_h5 import read_flat, write_flat
from rl_replay.checkpointers._files import read_json
from rl_replay.checkpointers.ted import (
    META_FILE,
    FlatStorageCheckpointer,
)

__all__ = ["H5StorageCheckpointer"]

H5_EXTRA = "pip install 'rl-replay[h5]'"


class H5StorageCheckpointer(FlatStorageCheckpointer):
    """Saves the storage in a compact form, saving space on the TED format and using H5 format to save the data.

    The flat format (see :class:`FlatStorageCheckpointer`) is written to one
    HDF5 file with h5py (``pip install 'rl-replay[h5]'``), optionally compressed.

    Args:
        checkpoint_file (str, optional): the file name inside the checkpoint
            directory. Defaults to ``"checkpoint.h5"``.
        done_keys (list of NestedKey, optional): see :class:`FlatStorageCheckpointer`.
        reward_keys (list of NestedKey, optional): see :class:`FlatStorageCheckpointer`.
        h5_kwargs (dict, optional): keyword arguments of h5py's ``create_dataset``
            (e.g. ``{"compression": "gzip"}``). Defaults to ``None``.
        **kwargs: accepted for API compatibility.

    Raises:
        ImportError: when built without h5py installed.

    Examples:
        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> from rl_replay import H5StorageCheckpointer, LazyTensorStorage
        >>> storage = LazyTensorStorage(4)
        >>> storage.checkpointer = H5StorageCheckpointer()
        >>> obs = torch.arange(3.0)
        >>> storage.set(torch.arange(3), TensorDict({"obs": obs, "next": {"obs": obs + 1}}, [3]))
        >>> path = tempfile.mkdtemp()
        >>> storage.dumps(path)
        >>> restored = LazyTensorStorage(4)
        >>> restored.checkpointer = H5StorageCheckpointer()
        >>> restored.loads(path)
        >>> restored.get(torch.arange(3))["next", "obs"].tolist()
        [1.0, 2.0, 3.0]
    """

    _format = "h5"

    def __init__(
        self,
        *,
        checkpoint_file: str = "checkpoint.h5",
        done_keys: list[NestedKey] | None = None,
        reward_keys: list[NestedKey] | None = None,
        h5_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        # kwargs: accepted for API compatibility (TorchRL forwards them to its TED converter).
        super().__init__(done_keys, reward_keys)
        self._h5py = _import_h5py()
        self.checkpoint_file = checkpoint_file
        self.h5_kwargs = dict(h5_kwargs or {})

    def _compress(self, storage: Any) -> tuple[TensorDictBase, TensorDictBase, dict[str, Any]]:
        kept, ends, meta = super()._compress(storage)
        meta["format"] = "h5"
        self._duplicated = meta["duplicated"]  # written into the file too (H5Combine reads it)
        return kept, ends, meta

    def _write(self, kept: TensorDictBase, ends: TensorDictBase, path: Path) -> None:
        write_flat(
            path / self.checkpoint_file,
            kept,
            ends,
            duplicated=getattr(self, "_duplicated", []),
            h5_kwargs=self.h5_kwargs,
            owner=type(self).__name__,
        )

    def _read(self, path: Path, owner: str) -> tuple[TensorDictBase, TensorDictBase]:
        file_path = path / self.checkpoint_file
        if not file_path.is_file():
            raise FileNotFoundError(
                f"{owner}.loads expected the HDF5 file {file_path}, which does not exist. "
                "The checkpoint is incomplete; dump it again."
            )
        batch = [None, *self._meta_inner(path, owner)]
        try:
            kept, ends, _, _ = read_flat(file_path, owner, batch_size=batch)
        except ValueError as err:
            raise ValueError(f"{err} The checkpoint is truncated or corrupt.") from err
        return kept, ends

    def _meta_inner(self, path: Path, owner: str) -> list[int]:
        return read_json(path / META_FILE, owner)["shape"][1:]


def _import_h5py() -> Any:  # Any: the h5py module
    try:
        return importlib.import_module("h5py")
    except ImportError as err:
        raise ImportError(f"H5StorageCheckpointer needs h5py. Install it with: {H5_EXTRA}") from err
