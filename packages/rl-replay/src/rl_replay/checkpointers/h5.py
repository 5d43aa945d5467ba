"""The HDF5 checkpointer :class:`H5StorageCheckpointer` (needs h5py: the ``h5`` extra).

h5py is imported when the checkpointer is built, never by ``import rl_replay``.
"""

from __future__ import annotations

import importlib
import zlib
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from rl_replay._ted_h5 import DATA_GROUP, ENDS_GROUP, _datasets, read_flat, write_flat
from rl_replay.checkpointers._files import read_json, write_json
from rl_replay.checkpointers.ted import (
    META_FILE,
    FlatStorageCheckpointer,
)

__all__ = ["H5StorageCheckpointer"]

H5_EXTRA = "pip install 'rl-replay[h5]'"
MANIFEST_SUFFIX = ".manifest.json"


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
        # the columns, dtypes, shapes and checksums the HDF5 file must have at load time
        write_json(
            path / f"{self.checkpoint_file}{MANIFEST_SUFFIX}", {"datasets": _describe(kept, ends)}
        )

    def _read(self, path: Path, owner: str) -> tuple[TensorDictBase, TensorDictBase]:
        file_path = path / self.checkpoint_file
        if not file_path.is_file():
            raise FileNotFoundError(
                f"{owner}.loads expected the HDF5 file {file_path}, which does not exist. "
                "The checkpoint is incomplete; dump it again."
            )
        manifest_path = path / f"{self.checkpoint_file}{MANIFEST_SUFFIX}"
        expected = read_json(manifest_path, owner).get("datasets")
        if not isinstance(expected, dict):
            raise ValueError(
                f"{owner}.loads expected a 'datasets' entry in {manifest_path}. The checkpoint "
                "is corrupt; dump it again."
            )
        batch = [None, *self._meta_inner(path, owner)]
        try:
            # names and shapes first (file metadata only), so a damaged column is named
            with self._h5py.File(file_path, "r") as file:
                shapes = {
                    "/".join((group, *key)): list(dataset.shape)
                    for group in (DATA_GROUP, ENDS_GROUP)
                    for key, dataset in _datasets(file, group)
                }
            _check_datasets(shapes, expected, file_path, owner, fields=("shape",))
            kept, ends, _, _ = read_flat(file_path, owner, batch_size=batch)
        except (OSError, KeyError, RuntimeError, TypeError) as err:
            raise ValueError(
                f"{owner}.loads could not read {file_path}: {err}. The checkpoint is truncated "
                "or corrupt; dump it again."
            ) from err
        _check_datasets(_describe(kept, ends), expected, file_path, owner)
        return kept, ends

    def _meta_inner(self, path: Path, owner: str) -> list[int]:
        return read_json(path / META_FILE, owner)["shape"][1:]


def _describe(kept: TensorDictBase, ends: TensorDictBase) -> dict[str, dict[str, Any]]:
    """dtype, shape and checksum of every tensor leaf, by dataset-like name."""
    out = {}
    for group, td in ((DATA_GROUP, kept), (ENDS_GROUP, ends)):
        for key, tensor in td.items(True, True):
            if not isinstance(tensor, torch.Tensor):
                continue  # non-tensor leaves are JSON inside the file
            raw = tensor.contiguous().view(-1).view(torch.uint8).numpy()
            name = "/".join((group, *(key if isinstance(key, tuple) else (key,))))
            out[name] = {
                "dtype": str(tensor.dtype),
                "shape": list(tensor.shape),
                "checksum": f"crc32:{zlib.crc32(raw):08x}",
            }
    return out


def _check_datasets(
    found: dict[str, Any],
    expected: dict[str, Any],
    file_path: Path,
    owner: str,
    fields: tuple[str, ...] = ("dtype", "shape", "checksum"),
) -> None:
    """Compare the datasets read with those written: columns, then ``fields`` of each.

    ``found`` maps a dataset name to its description (or, with ``fields=("shape",)``,
    to its shape alone).
    """
    for name in sorted(set(expected) | set(found)):
        if name not in found:
            raise ValueError(
                f"{owner}.loads expected the dataset {name!r} in {file_path}, which is missing. "
                "The checkpoint is incomplete or was edited; dump it again."
            )
        entry = expected.get(name)
        if not isinstance(entry, dict):
            raise ValueError(
                f"{owner}.loads found the dataset {name!r} in {file_path}, which the checkpoint "
                "did not write. Remove it or dump the checkpoint again."
            )
        got = found[name] if isinstance(found[name], dict) else {"shape": found[name]}
        for field in ("dtype", "shape"):
            if field in fields and entry.get(field) != got[field]:
                raise ValueError(
                    f"{owner}.loads expected the dataset {name!r} of {file_path} to have "
                    f"{field} {entry.get(field)!r}, found {got[field]!r}. The file was "
                    "edited or is corrupt; dump the checkpoint again."
                )
        if "checksum" in fields and entry.get("checksum") != got["checksum"]:
            raise ValueError(
                f"{owner}.loads found a checksum mismatch in the dataset {name!r} of {file_path}: "
                "its values changed since the dump. Dump the checkpoint again."
            )


def _import_h5py() -> Any:  # Any: the h5py module
    try:
        return importlib.import_module("h5py")
    except ImportError as err:
        raise ImportError(f"H5StorageCheckpointer needs h5py. Install it with: {H5_EXTRA}") from err
