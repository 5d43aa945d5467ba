"""The checkpoint format of sampler and writer states (``Sampler.dumps`` / ``Writer.dumps``).

A state (nested dicts and lists of JSON values and tensors) is saved as a
checksummed ``sampler_meta.json`` (class name and the JSON part, each tensor
replaced by a reference) and, when there are tensors, a tensor directory
``tensors/`` (see :mod:`rl_replay.checkpointers._files`).  Loading never
unpickles, and checks every reference against the files.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from rl_replay.checkpointers._files import (
    read_json,
    read_tensordict,
    refuse_pickles,
    write_json,
    write_tensordict,
)

__all__ = ["STATE_FILE", "dump_state", "load_state"]

STATE_FILE = "sampler_meta.json"
TENSOR_DIR = "tensors"
# Marks a tensor leaf inside the JSON metadata; the tensor lives under ``tensors/``.
_TENSOR_MARK = "__tensor__"


def dump_state(state: Mapping[str, Any], path: Path, *, owner: str) -> None:
    """Write ``state`` as JSON metadata plus tensor files under ``path``."""
    path.mkdir(parents=True, exist_ok=True)
    tensors: dict[str, torch.Tensor] = {}
    meta = _split(state, tensors, prefix="")
    if tensors:
        write_tensordict(path / TENSOR_DIR, tensors, owner)
    write_json(path / STATE_FILE, {"class": owner, "state": meta})


def load_state(path: Path, *, owner: str) -> dict[str, Any]:
    """Read a state written by :func:`dump_state`; errors name the file at fault.

    Raises:
        FileNotFoundError: if a file is missing.
        ValueError: if a file is corrupt, or was written by another class.
    """
    refuse_pickles(path, owner)
    meta_file = path / STATE_FILE
    content = read_json(meta_file, owner)
    if "class" not in content or "state" not in content:
        raise ValueError(
            f"{owner}.loads expected 'class' and 'state' entries in {meta_file}, found "
            f"{sorted(content)}. The checkpoint is corrupt; dump it again."
        )
    found, meta = content["class"], content["state"]
    if found != owner:
        raise ValueError(
            f"{owner}.loads expected a checkpoint written by {owner}, found one written by "
            f"{found} in {meta_file}. Load it into a {found} instead."
        )
    tensors: dict[str, torch.Tensor] = {}
    tensor_dir = path / TENSOR_DIR
    if _has_tensor(meta):
        td = read_tensordict(tensor_dir, owner)
        tensors = {key: td.get(key) for key in td.keys()}
    elif tensor_dir.exists():
        raise ValueError(
            f"{owner}.loads found the unexpected directory {tensor_dir}: {meta_file} refers to "
            "no tensor. Remove it or dump the checkpoint again."
        )
    return _join(meta, tensors, tensor_dir=tensor_dir, owner=owner)


def _split(state: Any, tensors: dict[str, torch.Tensor], prefix: str) -> Any:
    if isinstance(state, torch.Tensor):
        name = prefix or "root"
        tensors[name] = state.detach().cpu()
        return {_TENSOR_MARK: name}
    if isinstance(state, Mapping):
        return {
            str(k): _split(v, tensors, f"{prefix}__{k}" if prefix else str(k))
            for k, v in state.items()
        }
    if isinstance(state, (list, tuple)):
        return [_split(v, tensors, f"{prefix}__{i}") for i, v in enumerate(state)]
    return state


def _has_tensor(meta: Any) -> bool:
    if isinstance(meta, dict):
        return _TENSOR_MARK in meta or any(_has_tensor(v) for v in meta.values())
    if isinstance(meta, list):
        return any(_has_tensor(v) for v in meta)
    return False


def _join(meta: Any, tensors: dict[str, torch.Tensor], *, tensor_dir: Path, owner: str) -> Any:
    if isinstance(meta, dict):
        if _TENSOR_MARK in meta:
            name = meta[_TENSOR_MARK]
            if not isinstance(name, str) or name not in tensors:
                raise ValueError(
                    f"{owner}.loads expected the tensor {name!r} in {tensor_dir}, found only "
                    f"{sorted(tensors)}. The checkpoint is incomplete; dump it again."
                )
            return tensors[name]
        return {k: _join(v, tensors, tensor_dir=tensor_dir, owner=owner) for k, v in meta.items()}
    if isinstance(meta, list):
        return [_join(v, tensors, tensor_dir=tensor_dir, owner=owner) for v in meta]
    return meta
