"""HDF5 TED converters: :class:`H5Split` and :class:`H5Combine` (need h5py: the ``h5`` extra).

:class:`H5Split` writes the flat form of :class:`~rl_replay.TED2Flat` to an HDF5
file, one dataset per leaf (contiguous, or chunked by rows when compressed), written
block by block;
:class:`H5Combine` reads it back into a TED. The file layout::

    /storage/<key path>     each kept entry (the TED's batch size along its first dims)
    /ends/<n>_index         see rl_replay._ted
    /ends/<n>_value
    /non_tensor/<key path>  non-tensor leaves, one JSON string per step (flat over the batch)
    attributes              rl_replay_layout="ted-flat", duplicated, batch_size (JSON)

Nothing is unpickled when reading: tensors come from numeric datasets and
non-tensor values from JSON. h5py is imported when a converter is built.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from tensordict import NonTensorStack, TensorDict, TensorDictBase
from tensordict.utils import NestedKey

from rl_replay._leaves import as_tuple, leaf_keys
from rl_replay._multistep import DEFAULT_DONE_KEYS
from rl_replay._ted import NEXT, TED2Flat, flat_to_ted

__all__ = ["H5Combine", "H5Split", "LAYOUT", "import_h5py", "read_flat", "write_flat"]

H5_EXTRA = "pip install 'rl-replay[h5]'"
LAYOUT = "ted-flat"
DATA_GROUP = "storage"
ENDS_GROUP = "ends"
NON_TENSOR_GROUP = "non_tensor"
BLOCK_BYTES = 64 << 20  # write large leaves in blocks of about this many bytes
CHUNK_BYTES = 8 << 20  # the chunk size of compressed datasets


def import_h5py(owner: str) -> Any:  # Any: the h5py module
    """Imports h5py or raises an ImportError naming the extra to install."""
    try:
        return importlib.import_module("h5py")
    except ImportError as err:
        raise ImportError(f"{owner} needs h5py. Install it with: {H5_EXTRA}") from err


def _write_tensor(file: Any, name: str, tensor: torch.Tensor, h5_kwargs: dict[str, Any]) -> None:
    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:
        raise TypeError(
            f"H5Split cannot store {name!r} of dtype torch.bfloat16 (HDF5 has no such type). "
            "Cast it to float32 first."
        )
    array_dtype = _numpy_dtype(tensor)
    kwargs = dict(h5_kwargs)
    if tensor.ndim and tensor.shape[0] and "chunks" not in kwargs and "compression" in kwargs:
        # compressed datasets are chunked by rows, about CHUNK_BYTES per chunk (small chunks
        # make whole-dataset reads crawl through h5py's chunk cache); others stay contiguous
        row = max(1, tensor[0].numel() * tensor.element_size())
        kwargs["chunks"] = (max(1, min(tensor.shape[0], CHUNK_BYTES // row)), *tensor.shape[1:])
    if not tensor.ndim or not tensor.shape[0]:
        kwargs.pop("chunks", None)
        kwargs.pop("compression", None)
        kwargs.pop("compression_opts", None)
    dataset = file.create_dataset(name, shape=tuple(tensor.shape), dtype=array_dtype, **kwargs)
    if not tensor.numel():
        return
    if not tensor.ndim:
        dataset[()] = tensor.numpy()
        return
    step = max(1, BLOCK_BYTES // max(1, tensor[0].numel() * tensor.element_size()))
    for start in range(0, tensor.shape[0], step):
        dataset[start : start + step] = tensor[start : start + step].contiguous().numpy()


def _numpy_dtype(tensor: torch.Tensor) -> Any:  # Any: a numpy dtype
    return torch.empty(1, dtype=tensor.dtype).numpy().dtype


def write_flat(
    file_path: str | Path,
    kept: TensorDictBase,
    ends: TensorDictBase,
    *,
    duplicated: Sequence[Sequence[str]],
    h5_kwargs: dict[str, Any] | None = None,
    attrs: dict[str, Any] | None = None,
    owner: str = "H5Split",
) -> None:
    """Writes the parts of a flat TED to ``file_path`` (see the module doc)."""
    h5py = import_h5py(owner)
    h5_kwargs = dict(h5_kwargs or {})
    tensor_keys = {as_tuple(k) for k in kept.keys(True, True)}
    with h5py.File(file_path, "w") as file:
        file.attrs["rl_replay_layout"] = LAYOUT
        file.attrs["duplicated"] = json.dumps([list(k) for k in duplicated])
        file.attrs["batch_size"] = json.dumps(list(kept.batch_size))
        for name, value in (attrs or {}).items():
            file.attrs[name] = json.dumps(value)
        for group, td in ((DATA_GROUP, kept), (ENDS_GROUP, ends)):
            file.require_group(group)
            for key in td.keys(True, True):
                tensor = td.get(key)
                _write_tensor(file, "/".join((group, *as_tuple(key))), tensor, h5_kwargs)
        for key in leaf_keys(kept):
            if key in tensor_keys:
                continue
            values = kept.get(key)
            values = values.tolist() if hasattr(values, "tolist") else values
            if isinstance(values, list):
                flat = _flatten_list(values)
            else:  # one value for the whole batch
                flat = [values] * kept.batch_size.numel()
            try:
                encoded = [json.dumps(v) for v in flat]
            except TypeError as err:
                raise TypeError(
                    f"{owner} stores non-tensor leaves as JSON; the entry {key!r} holds a value "
                    f"that is not JSON-serializable ({err}). Convert it to str or numbers first."
                ) from err
            file.create_dataset(
                "/".join((NON_TENSOR_GROUP, *key)),
                data=encoded,
                dtype=h5py.string_dtype(),
            )


def _flatten_list(values: list[Any]) -> list[Any]:  # Any: non-tensor values
    out: list[Any] = []
    for value in values:
        if isinstance(value, list):
            out.extend(_flatten_list(value))
        else:
            out.append(value)
    return out


def read_flat(
    file_path: str | Path,
    owner: str = "H5Combine",
    *,
    batch_size: Sequence[int] | None = None,
) -> tuple[TensorDict, TensorDict, list[list[str]], dict[str, Any]]:
    """Reads ``(kept, ends, duplicated, attrs)`` written by :func:`write_flat`.

    A caller that knows the batch size from elsewhere (a checkpoint's metadata) may pass
    it (``None`` as its first dim: the stored length); files without the layout
    attributes (older checkpoints) are then accepted.

    Raises:
        FileNotFoundError: if the file does not exist.
        ValueError: if it is not an HDF5 file of this layout.
    """
    h5py = import_h5py(owner)
    file_path = Path(file_path)
    if not file_path.is_file():
        raise FileNotFoundError(
            f"{owner} expected the HDF5 file {file_path}, which does not exist. Write it with H5Split."
        )
    try:
        file = h5py.File(file_path, "r")
    except OSError as err:
        raise ValueError(
            f"{owner} could not read {file_path} as HDF5: {err}. The file is truncated, corrupt "
            "or not HDF5."
        ) from err
    with file:
        layout = file.attrs.get("rl_replay_layout")
        legacy = batch_size is not None and layout is None
        if not legacy and (layout != LAYOUT or DATA_GROUP not in file):
            raise ValueError(
                f"{owner} expected an HDF5 file written by H5Split (attribute "
                f"rl_replay_layout={LAYOUT!r} and a {DATA_GROUP!r} group), found layout "
                f"{layout!r} and groups {sorted(file.keys())} in {file_path}. Write it with H5Split."
            )
        attrs = {k: json.loads(v) for k, v in file.attrs.items() if k != "rl_replay_layout"}
        stored_batch = attrs.pop("batch_size", None)
        duplicated = attrs.pop("duplicated", [])
        data = _read_group(file, DATA_GROUP)
        batch = list(batch_size) if batch_size is not None else stored_batch
        if not data:
            batch = []
        elif batch and batch[0] is None:  # the leading dim comes from the data
            batch[0] = next(iter(data.values())).shape[0]
        ends = _read_group(file, ENDS_GROUP)
        kept = TensorDict(data, batch_size=batch)
        if NON_TENSOR_GROUP in file:
            for key, dataset in _datasets(file, NON_TENSOR_GROUP):
                values = [json.loads(v) for v in dataset.asstr()[()]]
                kept.set(key, _stack_non_tensor(values, batch))
    return kept, TensorDict(ends, batch_size=[]), duplicated, attrs


def _stack_non_tensor(values: list[Any], batch: Sequence[int]) -> NonTensorStack:  # Any: values
    def nest(items: list[Any], shape: Sequence[int]) -> list[Any]:
        if len(shape) <= 1:
            return items
        size = len(items) // shape[0]
        return [nest(items[i * size : (i + 1) * size], shape[1:]) for i in range(shape[0])]

    return NonTensorStack.from_list(nest(values, batch))


def _datasets(file: Any, group: str) -> list[tuple[tuple[str, ...], Any]]:  # Any: h5py objects
    out: list[tuple[tuple[str, ...], Any]] = []

    def visit(name: str, item: Any) -> None:  # Any: an h5py object
        if hasattr(item, "shape") and hasattr(item, "dtype"):
            out.append((tuple(name.split("/")), item))

    if group in file:
        file[group].visititems(visit)
    return out


def _read_group(file: Any, group: str) -> dict[tuple[str, ...], torch.Tensor]:  # Any: h5py.File
    out = {}
    for key, dataset in _datasets(file, group):
        out[key] = torch.from_numpy(dataset[()]) if dataset.shape else torch.tensor(dataset[()])
    return out


class H5Split(TED2Flat):
    """Splits a dataset prepared with TED2Nested into a TensorDict where each trajectory is stored as views on their parent nested tensors.

    Here: writes the compact (flat) form of a TED to an HDF5 file, one dataset per
    leaf (chunked by rows when compressed), written in blocks; :class:`H5Combine` reads it back. The
    keys are those of :class:`~rl_replay.TED2Flat`.

    Args:
        done_key (NestedKey, optional): see :class:`~rl_replay.TED2Flat`.
            Defaults to ``("next", "done")``.
        shift_key (NestedKey, optional): Defaults to ``"shift"``.
        is_full_key (NestedKey, optional): Defaults to ``"is_full"``.
        done_keys (tuple of NestedKey, optional): Defaults to
            ``("done", "terminated", "truncated")``.
        reward_keys (tuple of NestedKey, optional): Defaults to ``("reward",)``.

    Keyword Args:
        compression (str, optional): an h5py compression filter such as
            ``"gzip"`` or ``"lzf"``. Defaults to ``None``.
        compression_opts (int, optional): the filter's level. Defaults to ``None``.

    Raises:
        ImportError: when built without h5py installed.

    Examples:
        >>> import tempfile, torch
        >>> from pathlib import Path
        >>> from tensordict import TensorDict
        >>> obs = torch.arange(5.0)
        >>> ted = TensorDict({"obs": obs[:-1], "next": {"obs": obs[1:],
        ...     "done": torch.zeros(4, 1, dtype=torch.bool)}}, [4])
        >>> path = Path(tempfile.mkdtemp()) / "ted.h5"
        >>> _ = H5Split(compression="gzip")(ted, path)
        >>> H5Combine()(path)["next", "obs"]
        tensor([1., 2., 3., 4.])
    """

    def __init__(
        self,
        done_key: NestedKey = (NEXT, "done"),
        shift_key: NestedKey = "shift",
        is_full_key: NestedKey = "is_full",
        done_keys: Sequence[NestedKey] = DEFAULT_DONE_KEYS,
        reward_keys: Sequence[NestedKey] = ("reward",),
        *,
        compression: str | None = None,
        compression_opts: int | None = None,
    ) -> None:
        super().__init__(done_key, shift_key, is_full_key, done_keys, reward_keys)
        import_h5py("H5Split")
        self.h5_kwargs: dict[str, Any] = {}
        if compression is not None:
            self.h5_kwargs["compression"] = compression
        if compression_opts is not None:
            self.h5_kwargs["compression_opts"] = compression_opts

    def __call__(self, data: TensorDictBase, path: str | Path | None = None) -> Path:  # type: ignore[override]
        """Writes ``data`` to the HDF5 file ``path`` and returns the path.

        Raises:
            ValueError: if ``path`` is missing.
        """
        if path is None:
            raise ValueError("H5Split expected the path of the HDF5 file to write, got None.")
        flat = super().__call__(data)
        attrs = {}
        if self.shift is not None:
            attrs["shift"] = int(self.shift)
        if self.is_full is not None:
            attrs["is_full"] = bool(self.is_full)
        write_flat(
            path,
            flat.get("data"),
            flat.get("ends"),
            duplicated=flat.get_non_tensor("duplicated"),
            h5_kwargs=self.h5_kwargs,
            attrs=attrs,
        )
        return Path(path)


class H5Combine:
    """Combines trajectories in a persistent tensordict into a single standing tensordict stored in filesystem.

    Here: reads an HDF5 file written by :class:`H5Split` back into a TED
    (without unpickling anything).

    Raises:
        ImportError: when built without h5py installed.

    Examples:
        >>> import tempfile, torch
        >>> from pathlib import Path
        >>> from tensordict import TensorDict
        >>> ted = TensorDict({"obs": torch.zeros(3, 2), "next": {"obs": torch.ones(3, 2),
        ...     "done": torch.ones(3, 1, dtype=torch.bool)}}, [3])
        >>> path = H5Split()(ted, Path(tempfile.mkdtemp()) / "ted.h5")
        >>> bool((H5Combine()(path) == ted).all())
        True
    """

    def __init__(self) -> None:
        import_h5py("H5Combine")

    def __call__(self, data: str | Path, out: TensorDictBase | None = None) -> TensorDictBase:
        """Reads the file ``data`` and returns its TED (written into ``out`` too when given).

        Raises:
            FileNotFoundError: if the file does not exist.
            ValueError: if it is not an HDF5 file written by :class:`H5Split`.
        """
        kept, ends, duplicated, _ = read_flat(data)
        ted = flat_to_ted(kept, ends, duplicated)
        if out is not None:
            out.update(ted)
            return out
        return ted
