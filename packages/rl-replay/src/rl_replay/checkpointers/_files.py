"""Checkpoint file helpers: checksummed JSON metadata and raw tensor files.

Nothing here unpickles, imports or evaluates anything named by a file.  A
checkpoint is made of

* JSON files (UTF-8, one object each) carrying a ``"checksum"`` entry: the
  CRC-32 of the object's other entries, so an edited or damaged file is an
  error rather than wrong data;
* tensor directories: a ``manifest.json`` listing, for each tensor, its key,
  dtype (one of a fixed list of plain numeric dtypes), shape and the CRC-32
  of its bytes, next to one raw little-endian data file per tensor.

Reading checks everything before any tensor is handed out: the file names
(no path outside the directory), that no other file sits in the directory (a
``*.pickle`` left there is refused), every size against dtype and shape, and
every checksum.  Checksums are computed when a checkpoint is written and
verified when it is read, never on the write path of a buffer.
"""

from __future__ import annotations

import json
import re
import sys
import warnings
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase, is_tensor_collection

__all__ = [
    "MANIFEST",
    "read_json",
    "read_tensordict",
    "refuse_pickles",
    "rewrite_json",
    "write_json",
    "write_tensordict",
]

MANIFEST = "manifest.json"
CHECKSUM = "checksum"
_CHUNK = 1 << 22  # read and checksum 4 MiB at a time
_BLOCK = 1 << 20  # rows of a strided tensor gathered per write: 1 MiB, stays in cache
_DATA_NAME = re.compile(r"^[0-9]+\.bin$")
# The dtypes a checkpoint may hold, by name: plain numbers only, never objects.
DTYPES: dict[str, torch.dtype] = {
    str(dtype).removeprefix("torch."): dtype
    for dtype in (
        torch.bool,
        torch.uint8,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.float16,
        torch.bfloat16,
        torch.float32,
        torch.float64,
        torch.complex64,
        torch.complex128,
    )
}


# ---------------------------------------------------------------- JSON
def _crc_of(content: Mapping[str, Any]) -> str:
    text = json.dumps(content, separators=(",", ":"))
    return f"crc32:{zlib.crc32(text.encode()):08x}"


def write_json(path: Path, content: Mapping[str, Any]) -> None:
    """Write the dict ``content`` to ``path`` as JSON with a checksum entry.

    Raises:
        ValueError: if ``content`` already has a ``"checksum"`` entry.
    """
    if CHECKSUM in content:
        raise ValueError(f"write_json reserves the entry {CHECKSUM!r}; rename it.")
    body = dict(content)
    # the checksum covers the text of the other entries, as json.loads gives them back
    body[CHECKSUM] = _crc_of(json.loads(json.dumps(body)))
    with open(path, "w", encoding="utf-8") as file:
        json.dump(body, file)


def rewrite_json(path: Path, content: Mapping[str, Any]) -> None:
    """Replace the checksummed JSON file ``path`` with ``content`` (for tools and tests)."""
    body = {k: v for k, v in content.items() if k != CHECKSUM}
    write_json(path, body)


def read_json(path: Path, owner: str) -> dict[str, Any]:
    """Read the checksummed JSON object ``path``; errors name the file and the problem.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        ValueError: if it is not UTF-8 JSON holding an object, or its checksum
            entry is missing or does not match its content.
    """
    if not path.is_file():
        raise FileNotFoundError(
            f"{owner}.loads expected the file {path}, which does not exist. "
            "Pass the directory written by dumps(); the checkpoint may be incomplete."
        )
    try:
        content = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise ValueError(
            f"{owner}.loads could not parse {path}: expected UTF-8 JSON, got an unreadable file "
            f"({err}). The checkpoint is truncated or corrupt; dump it again."
        ) from err
    if not isinstance(content, dict):
        raise ValueError(
            f"{owner}.loads expected a JSON object in {path}, found a {type(content).__name__}. "
            "The file is not part of a checkpoint written by dumps()."
        )
    found = content.pop(CHECKSUM, None)
    expected = _crc_of(content)
    if found != expected:
        raise ValueError(
            f"{owner}.loads found a checksum mismatch in {path}: expected {expected}, the file "
            f"says {found!r}. The file was edited or damaged; dump the checkpoint again."
        )
    return content


PICKLE_SUFFIXES = (".pickle", ".pkl", ".pt", ".pth", ".npy", ".npz")


def refuse_pickles(path: Path, owner: str) -> None:
    """Raise if the checkpoint directory ``path`` holds a file in a pickle-capable format.

    Checkpoints are JSON and raw tensor files only; a pickle found in one was
    put there by someone else, and loading refuses the whole checkpoint.

    Raises:
        ValueError: naming the first such file.
    """
    if not path.is_dir():
        return
    for child in sorted(path.rglob("*")):
        if child.suffix.lower() in PICKLE_SUFFIXES:
            raise ValueError(
                f"{owner}.loads refuses the checkpoint {path}: it holds {child}, a file format that "
                "can run code when loaded. Checkpoints written by dumps() hold JSON and raw "
                "tensor files only; remove the file or dump the checkpoint again."
            )


# ---------------------------------------------------------------- validation helpers
def check_int(
    value: Any, name: str, where: Path, owner: str, *, low: int = 0, high: int | None = None
) -> int:
    """Return ``value`` if it is an int in ``[low, high]``; else a ValueError naming ``where``."""
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= low
    if ok and high is not None:
        ok = value <= high
    if not ok:
        bound = f"an int >= {low}" if high is None else f"an int in [{low}, {high}]"
        raise ValueError(
            f"{owner}.loads expected {name} to be {bound} in {where}, found {value!r}. "
            "The checkpoint is corrupt; dump it again."
        )
    return value


def check_shape(value: Any, name: str, where: Path, owner: str) -> list[int]:
    """Return ``value`` if it is a list of non-negative ints; else a ValueError naming ``where``."""
    if not isinstance(value, list) or not all(
        isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in value
    ):
        raise ValueError(
            f"{owner}.loads expected {name} to be a list of non-negative ints in {where}, "
            f"found {value!r}. The checkpoint is corrupt; dump it again."
        )
    return value


# ---------------------------------------------------------------- tensors
def _as_bytes(tensor: torch.Tensor) -> Any:  # Any: a numpy uint8 array viewing the tensor
    return tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy()


def _header_crc(dtype: str, shape: Any) -> int:
    # the data checksum starts from the dtype and shape: editing either in the manifest fails it
    return zlib.crc32(json.dumps([dtype, shape], separators=(",", ":")).encode())


def _write_raw(path: Path, raw: Any, crc: int) -> str:
    view = memoryview(raw)
    with open(path, "wb") as file:
        for start in range(0, len(view), _CHUNK):
            chunk = view[start : start + _CHUNK]
            crc = zlib.crc32(chunk, crc)
            file.write(chunk)
    return f"crc32:{crc:08x}"


def _write_columns(path: Path, columns: list[tuple[dict[str, Any], torch.Tensor]]) -> None:
    """Write strided tensors to their files, a block of rows of every tensor at a time.

    The tensors of a storage are column views of one row-interleaved buffer:
    copying the same rows of each in turn reads that buffer once, through the
    cache, and no full-size contiguous copy is ever allocated.
    """
    rows = {t.shape[0] if t.ndim else -1 for _, t in columns}
    if len(rows) != 1 or -1 in rows:  # no common leading dim: one tensor after the other
        for entry, tensor in columns:
            header = _header_crc(entry["dtype"], entry["shape"])
            entry[CHECKSUM] = _write_raw(path / entry["file"], _as_bytes(tensor), header)
        return
    (count,) = rows
    widest = max(max(t[:1].numel(), 1) * t.element_size() for _, t in columns)
    step = max(1, _BLOCK // widest)
    crcs = [_header_crc(entry["dtype"], entry["shape"]) for entry, _ in columns]
    # one reusable block per tensor: no allocation (and no page fault) per write
    blocks = [torch.empty((step, *t.shape[1:]), dtype=t.dtype) for _, t in columns]
    files = [open(path / entry["file"], "wb") for entry, _ in columns]
    try:
        for start in range(0, count, step):
            size = min(step, count - start)
            for i, (_, tensor) in enumerate(columns):
                block = blocks[i][:size]
                block.copy_(tensor[start : start + size])
                raw = block.reshape(-1).view(torch.uint8).numpy()
                crcs[i] = zlib.crc32(raw, crcs[i])
                files[i].write(raw)
    finally:
        for file in files:
            file.close()
    for (entry, _), crc in zip(columns, crcs, strict=True):
        entry[CHECKSUM] = f"crc32:{crc:08x}"


def _leaves(td: Any) -> Iterable[tuple[tuple[str, ...], Any]]:
    for key, value in td.items(True, True):
        yield (key if isinstance(key, tuple) else (key,)), value


def write_tensordict(
    path: Path, td: TensorDictBase | Mapping[str, torch.Tensor], owner: str
) -> None:
    """Write every tensor of ``td`` under the new directory ``path`` with a manifest.

    Raises:
        TypeError: if a leaf is not a tensor of a plain numeric dtype.
    """
    if not is_tensor_collection(td):
        td = TensorDict(dict(td), batch_size=[])
    path.mkdir(parents=True, exist_ok=True)
    entries = []
    columns: list[tuple[dict[str, Any], torch.Tensor]] = []
    for number, (key, tensor) in enumerate(_leaves(td)):
        if (
            not isinstance(tensor, torch.Tensor)
            or str(tensor.dtype).removeprefix("torch.") not in DTYPES
        ):
            kind = tensor.dtype if isinstance(tensor, torch.Tensor) else type(tensor).__name__
            raise TypeError(
                f"{owner}.dumps can save tensors of the dtypes {sorted(DTYPES)}; the entry {key!r} "
                f"is {kind}, which would need pickle. Convert it to a tensor or drop it."
            )
        entry: dict[str, Any] = {
            "key": list(key),
            "file": f"{number}.bin",
            "dtype": str(tensor.dtype).removeprefix("torch."),
        }
        if tensor.is_nested:
            pieces = [piece.contiguous() for piece in tensor.unbind(0)]
            entry["nested_shapes"] = [list(piece.shape) for piece in pieces]
            flat = (
                torch.cat([piece.reshape(-1) for piece in pieces])
                if pieces
                else tensor.new_empty(0)
            )
            header = _header_crc(entry["dtype"], entry["nested_shapes"])
            entry[CHECKSUM] = _write_raw(path / entry["file"], _as_bytes(flat), header)
        else:
            entry["shape"] = list(tensor.shape)
            columns.append((entry, tensor.detach().cpu()))
        entries.append(entry)
    _write_columns(path, columns)
    write_json(
        path / MANIFEST,
        {"byteorder": sys.byteorder, "batch_size": list(td.batch_size), "entries": entries},
    )


def read_tensordict(path: Path, owner: str) -> TensorDict:
    """Read a directory written by :func:`write_tensordict`, checking every file first.

    Raises:
        FileNotFoundError: if the directory, its manifest or a data file is missing.
        ValueError: if a file is unexpected (e.g. a pickle), truncated, of the wrong
            size, fails its checksum, or the manifest is malformed.
    """
    if not path.is_dir():
        raise FileNotFoundError(
            f"{owner}.loads expected the tensors directory {path}, which does not exist. "
            "The checkpoint is incomplete; dump it again."
        )
    manifest_path = path / MANIFEST
    manifest = read_json(manifest_path, owner)
    entries = manifest.get("entries")
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ValueError(
            f"{owner}.loads expected a list of entries in {manifest_path}, found {entries!r}. "
            "The checkpoint is corrupt; dump it again."
        )
    if manifest.get("byteorder") != sys.byteorder:
        raise ValueError(
            f"{owner}.loads expected tensors in {sys.byteorder}-endian order, {manifest_path} "
            f"says {manifest.get('byteorder')!r}. Dump the checkpoint on this machine's byte order."
        )
    batch_size = check_shape(manifest.get("batch_size"), "batch_size", manifest_path, owner)
    known = {MANIFEST}
    for entry in entries:
        name = entry.get("file")
        if not isinstance(name, str) or not _DATA_NAME.match(name):
            raise ValueError(
                f"{owner}.loads expected data file names like '0.bin' in {manifest_path}, found "
                f"{name!r}. The checkpoint is corrupt or crafted; dump it again."
            )
        known.add(name)
    for child in path.iterdir():
        if child.name not in known:
            raise ValueError(
                f"{owner}.loads found the unexpected file {child}: a checkpoint holds only the "
                f"files its manifest {manifest_path} lists, never pickles. Remove it or dump the "
                "checkpoint again."
            )
    out: dict[tuple[str, ...], torch.Tensor] = {}
    for entry in entries:
        key = entry.get("key")
        if not isinstance(key, list) or not key or not all(isinstance(k, str) for k in key):
            raise ValueError(
                f"{owner}.loads expected each key in {manifest_path} to be a list of strings, "
                f"found {key!r}. The checkpoint is corrupt; dump it again."
            )
        out[tuple(key)] = _read_entry(path, entry, manifest_path, owner)
    try:
        return TensorDict(out, batch_size=batch_size)
    except RuntimeError as err:
        raise ValueError(
            f"{owner}.loads found tensors in {path} that do not fit the batch size {batch_size} "
            f"of {manifest_path} ({err}). The checkpoint is corrupt; dump it again."
        ) from err


def _read_entry(path: Path, entry: dict[str, Any], manifest_path: Path, owner: str) -> torch.Tensor:
    data_file = path / entry["file"]
    dtype = DTYPES.get(entry.get("dtype"))  # type: ignore[arg-type]
    if dtype is None:
        raise ValueError(
            f"{owner}.loads expected the dtype of {data_file} to be one of {sorted(DTYPES)} in "
            f"{manifest_path}, found {entry.get('dtype')!r}. Checkpoints hold plain tensors only."
        )
    nested = "nested_shapes" in entry
    if nested:
        shapes = entry["nested_shapes"]
        if not isinstance(shapes, list):
            raise ValueError(
                f"{owner}.loads expected a list of shapes in {manifest_path}, found {shapes!r}."
            )
        shapes = [check_shape(s, "a nested shape", manifest_path, owner) for s in shapes]
        numel = sum(_numel(s) for s in shapes)
    else:
        shape = check_shape(
            entry.get("shape"), f"the shape of {data_file.name}", manifest_path, owner
        )
        numel = _numel(shape)
    itemsize = torch.empty((), dtype=dtype).element_size()
    expected = numel * itemsize
    if not data_file.is_file():
        raise FileNotFoundError(
            f"{owner}.loads expected the data file {data_file}, which does not exist. "
            "The checkpoint is incomplete; dump it again."
        )
    found = data_file.stat().st_size
    if found != expected:
        raise ValueError(
            f"{owner}.loads expected {data_file} to hold {expected} bytes ({numel} x "
            f"{entry['dtype']}), found {found} bytes. The checkpoint is truncated or corrupt; "
            "dump it again."
        )
    flat = torch.empty(numel, dtype=dtype)
    raw = flat.view(torch.uint8).numpy() if numel else bytearray()
    crc = _read_raw(data_file, raw, _header_crc(entry["dtype"], shapes if nested else shape))
    if crc != entry.get(CHECKSUM):
        raise ValueError(
            f"{owner}.loads found a checksum mismatch in {data_file}: {manifest_path} says "
            f"{entry.get(CHECKSUM)!r}, the data gives {crc}. The file is damaged; dump the "
            "checkpoint again."
        )
    if dtype is torch.bool and numel and bool((flat.view(torch.uint8) > 1).any()):
        raise ValueError(
            f"{owner}.loads expected booleans (bytes 0 or 1) in {data_file}, found other bytes. "
            "The checkpoint is corrupt; dump it again."
        )
    if nested:
        pieces, start = [], 0
        for shape in shapes:
            size = _numel(shape)
            pieces.append(flat[start : start + size].view(shape))
            start += size
        with warnings.catch_warnings():  # the strided nested layout is what was saved
            warnings.simplefilter("ignore", UserWarning)
            return torch.nested.nested_tensor(pieces)
    return flat.view(shape)


def _read_raw(path: Path, raw: Any, crc: int) -> str:
    view = memoryview(raw).cast("B")
    with open(path, "rb", buffering=0) as file:
        start = 0
        while start < len(view):
            count = file.readinto(view[start : start + _CHUNK])
            if not count:
                break
            crc = zlib.crc32(view[start : start + count], crc)  # while the chunk is in cache
            start += count
    return f"crc32:{crc:08x}"


def _numel(shape: list[int]) -> int:
    out = 1
    for size in shape:
        out *= int(size)
    return out
