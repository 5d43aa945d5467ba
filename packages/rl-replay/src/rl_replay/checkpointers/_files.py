"""Checkpoint file helpers: JSON metadata, verified memory-mapped tensors, atomic directories.

Nothing here unpickles: metadata is JSON and tensors are memory-mapped files
described by tensordict's ``meta.json``.  Memory-mapped files are checked
against the size their metadata announces before they are mapped, so a
truncated checkpoint is an error rather than a crash on first read.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

__all__ = [
    "COMPLETE_MARKER",
    "atomic_directory",
    "check_complete",
    "load_memmap_dir",
    "read_json",
    "write_json",
]

COMPLETE_MARKER = ".complete"


def write_json(path: Path, content: Any) -> None:  # Any: any JSON-able value
    """Write ``content`` to ``path`` as JSON."""
    with open(path, "w") as file:
        json.dump(content, file)


def read_json(path: Path, owner: str) -> Any:  # Any: the JSON value
    """Read the JSON file ``path``; errors name the file and the problem.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        ValueError: if it is not valid JSON.
    """
    if not path.is_file():
        raise FileNotFoundError(
            f"{owner}.loads expected the file {path}, which does not exist. "
            "Pass the directory written by dumps(); the checkpoint may be incomplete."
        )
    try:
        with open(path) as file:
            return json.load(file)
    except json.JSONDecodeError as err:
        raise ValueError(
            f"{owner}.loads could not parse {path}: expected JSON, got an unreadable file ({err}). "
            "The checkpoint is truncated or corrupt; dump it again."
        ) from err


def load_memmap_dir(path: Path, owner: str) -> TensorDictBase:
    """Load a tensordict saved with ``memmap`` after checking every file's size.

    Raises:
        FileNotFoundError: if the directory, a ``meta.json`` or a data file is missing.
        ValueError: if a data file is shorter or longer than its metadata says.
    """
    if not path.is_dir():
        raise FileNotFoundError(
            f"{owner}.loads expected the memory-mapped tensors directory {path}, which does not "
            "exist. The checkpoint is incomplete; dump it again."
        )
    _verify_sizes(path, owner)
    return TensorDict.load_memmap(path)


def _verify_sizes(path: Path, owner: str) -> None:
    meta = read_json(path / "meta.json", owner)
    for name, entry in meta.items():
        if not isinstance(entry, dict):
            continue
        if entry.get("type") is not None and "shape" not in entry:
            _verify_sizes(path / name, owner)
            continue
        if "shape" not in entry or "dtype" not in entry or entry.get("is_nested"):
            continue
        dtype = getattr(torch, str(entry["dtype"]).removeprefix("torch."))
        expected = _numel(entry["shape"]) * torch.empty((), dtype=dtype).element_size()
        data_file = path / f"{name}.memmap"
        if expected == 0 and not data_file.exists():
            continue  # tensordict writes no file for an empty tensor
        if not data_file.is_file():
            raise FileNotFoundError(
                f"{owner}.loads expected the data file {data_file}, which does not exist. "
                "The checkpoint is incomplete; dump it again."
            )
        found = data_file.stat().st_size
        if found != expected:
            raise ValueError(
                f"{owner}.loads expected {data_file} to hold {expected} bytes (shape "
                f"{entry['shape']}, {entry['dtype']}), found {found} bytes. The checkpoint is "
                "truncated or corrupt; dump it again."
            )


def _numel(shape: list[int]) -> int:
    out = 1
    for size in shape:
        out *= int(size)
    return out


def check_complete(path: Path, owner: str) -> None:
    """Raise unless ``path`` is a checkpoint directory whose completion marker exists.

    Raises:
        FileNotFoundError: if ``path`` or its completion marker is missing.
    """
    if not path.is_dir():
        raise FileNotFoundError(
            f"{owner}.loads expected a checkpoint directory at {path}, which does not exist."
        )
    if not (path / COMPLETE_MARKER).is_file():
        raise FileNotFoundError(
            f"{owner}.loads expected the completion marker {path / COMPLETE_MARKER}, which does "
            "not exist: the dump that wrote this directory did not finish. Dump it again."
        )


@contextlib.contextmanager
def atomic_directory(path: Path) -> Iterator[Path]:
    """Yield a temporary sibling directory that replaces ``path`` once the block succeeds.

    The block writes into ``path.tmp-xxxx``; on success a completion marker is
    written and the directory is renamed over ``path``.  On failure the
    temporary directory is removed and ``path`` is left untouched.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{path.name}.tmp-", dir=path.parent))
    try:
        yield tmp
        write_json(tmp / COMPLETE_MARKER, {"complete": True})
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f"{path.name}.old-", dir=path.parent))
            os.rename(path, old / path.name)
            os.rename(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
