"""The HDF5 checkpointer :class:`H5StorageCheckpointer` (needs h5py: the ``h5`` extra).

h5py is imported when the checkpointer is built, never by ``import rl_replay``.
"""

from __future__ import annotations

import importlib
import zlib
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey

from rl_replay.checkpointers._files import read_json, write_json
from rl_replay.checkpointers.ted import (
    DATA_DIR,
    ENDS_DIR,
    META_FILE,
    FlatStorageCheckpointer,
    _as_tuple,
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
        return kept, ends, meta

    def _write(self, kept: TensorDictBase, ends: TensorDictBase, path: Path) -> None:
        datasets = {}
        with self._h5py.File(path / self.checkpoint_file, "w") as file:
            for group, td in ((DATA_DIR, kept), (ENDS_DIR, ends)):
                for key, tensor in td.items(True, True):
                    name = "/".join((group, *_as_tuple(key)))
                    array = tensor.contiguous().numpy()
                    file.create_dataset(name, data=array, **self.h5_kwargs)
                    datasets[name] = {
                        "dtype": str(array.dtype),
                        "shape": list(array.shape),
                        "checksum": _crc(array),
                    }
        # the columns, dtypes, shapes and checksums the HDF5 file must have at load time
        write_json(path / f"{self.checkpoint_file}{MANIFEST_SUFFIX}", {"datasets": datasets})

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
        try:
            with self._h5py.File(file_path, "r") as file:
                groups = [_read_group(file, name) for name in (DATA_DIR, ENDS_DIR)]
        except (
            OSError,
            TypeError,
            ValueError,
        ) as err:  # h5py: OSError; non-numeric data: TypeError
            raise ValueError(
                f"{owner}.loads could not read {file_path}: {err}. The checkpoint is truncated or corrupt."
            ) from err
        _check_datasets(groups, expected, file_path, owner)
        data, ends = groups
        first = next(iter(data.values()), None)
        batch = [] if first is None else [first.shape[0], *self._meta_inner(path, owner)]
        return TensorDict(data, batch_size=batch), TensorDict(ends, batch_size=[])

    def _meta_inner(self, path: Path, owner: str) -> list[int]:
        return read_json(path / META_FILE, owner)["shape"][1:]


def _read_group(file: Any, name: str) -> dict[tuple[str, ...], torch.Tensor]:  # Any: an h5py.File
    out: dict[tuple[str, ...], torch.Tensor] = {}
    if name not in file:
        return out

    def visit(item_name: str, item: Any) -> None:  # Any: an h5py object
        if hasattr(item, "shape") and hasattr(item, "dtype"):
            out[tuple(item_name.split("/"))] = torch.from_numpy(item[()])

    file[name].visititems(visit)
    return out


def _crc(array: Any) -> str:  # Any: a numpy array
    return f"crc32:{zlib.crc32(array.tobytes() if not array.flags.c_contiguous else array):08x}"


def _check_datasets(
    groups: list[dict[tuple[str, ...], torch.Tensor]],
    expected: dict[str, Any],
    file_path: Path,
    owner: str,
) -> None:
    """Compare the datasets read with those written: columns, dtypes, shapes, checksums."""
    found = {
        "/".join((group, *key)): tensor
        for group, td in zip((DATA_DIR, ENDS_DIR), groups, strict=True)
        for key, tensor in td.items()
    }
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
        array = found[name].numpy()
        for field, value in (("dtype", str(array.dtype)), ("shape", list(array.shape))):
            if entry.get(field) != value:
                raise ValueError(
                    f"{owner}.loads expected the dataset {name!r} of {file_path} to have "
                    f"{field} {entry.get(field)!r}, found {value!r}. The file was edited or is "
                    "corrupt; dump the checkpoint again."
                )
        if entry.get("checksum") != _crc(array):
            raise ValueError(
                f"{owner}.loads found a checksum mismatch in the dataset {name!r} of {file_path}: "
                "its values changed since the dump. Dump the checkpoint again."
            )


def _import_h5py() -> Any:  # Any: the h5py module
    try:
        return importlib.import_module("h5py")
    except ImportError as err:
        raise ImportError(f"H5StorageCheckpointer needs h5py. Install it with: {H5_EXTRA}") from err
