"""Buffer checkpoints: what :meth:`ReplayBuffer.dumps` writes and :meth:`ReplayBuffer.loads` reads.

``dumps`` writes the storage, sampler and writer into a fresh snapshot
directory and commits it with one atomic pointer replacement (see
``checkpointers/_commit.py``).  ``loads`` is two-phase: every file is read
and checked first (storage content, sampler and writer states, buffer
metadata, and the writer cursor against the storage's capacity); only then
are the components changed, the storage last.  If a component still refuses
its state, the sampler and writer get their previous state back, so a failed
``loads`` leaves the buffer as it was.
"""

from __future__ import annotations

import copy
import threading
from pathlib import Path
from typing import Any

from rl_replay.checkpointers._commit import committed_snapshot, snapshot_directory
from rl_replay.checkpointers._files import read_json, refuse_pickles, write_json
from rl_replay.checkpointers._state import load_state
from rl_replay.samplers import Sampler
from rl_replay.writers import Writer

__all__ = ["dump_buffer", "load_buffer", "load_buffer_state"]

META_FILE = "buffer_metadata.json"
_LOCKS = (type(threading.Lock()), type(threading.RLock()))


def dump_buffer(buffer: Any, path: Path) -> None:  # Any: a ReplayBuffer
    """Write ``buffer`` into a new snapshot of the checkpoint ``path`` and commit it."""
    storage = buffer._storage
    with snapshot_directory(path) as snapshot:
        storage.dumps(snapshot / "storage")
        buffer._sampler.dumps(snapshot / "sampler")
        buffer._writer.dumps(snapshot / "writer")
        write_json(
            snapshot / META_FILE,
            {
                "type": type(buffer).__name__,
                "batch_size": buffer._batch_size,
                "len": len(buffer),
                "rows": int(storage.shape[0]) if hasattr(storage, "shape") else None,
            },
        )


def load_buffer(buffer: Any, path: Path) -> None:  # Any: a ReplayBuffer
    """Read and check the checkpoint ``path``, then load it into ``buffer`` in one step.

    Raises:
        FileNotFoundError: if a file of the checkpoint is missing.
        ValueError: if a file is corrupt or does not fit the buffer (the buffer is unchanged).
    """
    owner = type(buffer).__name__
    snapshot = committed_snapshot(path, owner)
    refuse_pickles(snapshot, owner)
    meta_file = snapshot / META_FILE
    meta = read_json(meta_file, owner)
    batch_size = meta.get("batch_size")
    if batch_size is not None and (
        isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0
    ):
        raise ValueError(
            f"{owner}.loads expected batch_size to be a positive int or null in {meta_file}, "
            f"found {batch_size!r}. The checkpoint is corrupt; dump it again."
        )
    # phase 1: read and check everything; nothing changes
    load_storage = buffer._storage._stage_loads(snapshot / "storage")
    load_sampler = _stage_component(buffer._sampler, Sampler, snapshot / "sampler")
    load_writer = _stage_component(buffer._writer, Writer, snapshot / "writer")
    _check_cursor(load_writer, meta.get("rows"), snapshot / "writer", owner)
    # phase 2: change the components, the storage (whose data cannot be restored) last
    saved = [(part, _save(part, buffer._storage)) for part in (buffer._sampler, buffer._writer)]
    try:
        load_sampler()
        load_writer()
        load_storage()
    except BaseException:
        for part, state in saved:
            _restore(part, state)
        raise
    buffer._batch_size = batch_size


def load_buffer_state(buffer: Any, state_dict: dict[str, Any]) -> None:  # Any: a ReplayBuffer
    """Load the output of ``state_dict()``; if a component refuses its part, nothing changes.

    Raises:
        KeyError: if an entry of ``state_dict`` is missing.
    """
    missing = {"_storage", "_sampler", "_writer", "_batch_size"} - set(state_dict)
    if missing:
        raise KeyError(
            f"{type(buffer).__name__}.load_state_dict expected the entries {sorted(missing)}, "
            f"found {sorted(state_dict)}. Pass the output of state_dict()."
        )
    saved = [(part, _save(part, buffer._storage)) for part in (buffer._sampler, buffer._writer)]
    try:
        buffer._sampler.load_state_dict(state_dict["_sampler"])
        buffer._writer.load_state_dict(state_dict["_writer"])
        buffer._storage.load_state_dict(state_dict["_storage"])  # checks before it copies
    except BaseException:
        for part, state in saved:
            _restore(part, state)
        raise
    buffer._batch_size = state_dict["_batch_size"]


class _StateLoader:
    """The step that loads a sampler or writer state already read from disk."""

    def __init__(self, component: Any, state: dict[str, Any] | None, path: Path) -> None:
        self.component, self.state, self.path = component, state, path

    def __call__(self) -> None:
        if self.state is None:  # a component with its own loads: it reads now
            self.component.loads(self.path)
        else:
            self.component.load_state_dict(self.state)


def _stage_component(component: Any, base: type, path: Path) -> _StateLoader:
    if type(component).loads is not base.loads:
        return _StateLoader(component, None, path)
    return _StateLoader(component, load_state(path, owner=type(component).__name__), path)


def _check_cursor(loader: _StateLoader, rows: Any, path: Path, owner: str) -> None:
    """A writer cursor must point into the storage it writes to."""
    state = loader.state
    if not isinstance(state, dict) or "_cursor" not in state:
        return
    cursor = state["_cursor"]
    high = max(rows, 1) if isinstance(rows, int) and not isinstance(rows, bool) else None
    if (
        isinstance(cursor, bool)
        or not isinstance(cursor, int)
        or cursor < 0
        or (high is not None and cursor >= high)
    ):
        raise ValueError(
            f"{owner}.loads expected the writer cursor in {path} to be an int in "
            f"[0, {high}), found {cursor!r}. The checkpoint is corrupt; dump it again."
        )


def _save(component: Any, storage: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The attributes of ``component`` and deep copies of their values (the storage is shared)."""
    original = dict(vars(component))
    copies = {}
    for name, value in original.items():
        if value is storage or isinstance(value, _LOCKS):
            continue
        try:
            copies[name] = copy.deepcopy(value, {id(storage): storage})
        except Exception:  # not copyable (process locks): restored by reference
            continue
    return original, copies


def _restore(component: Any, saved: tuple[dict[str, Any], dict[str, Any]]) -> None:
    original, copies = saved
    attributes = vars(component)
    attributes.clear()
    for name, value in original.items():
        if name not in copies:
            attributes[name] = value
        elif hasattr(value, "copy_") and _same_layout(value, copies[name]):
            value.copy_(copies[name])  # keep the object: it may be shared with other processes
            attributes[name] = value
        else:
            attributes[name] = copies[name]


def _same_layout(value: Any, copied: Any) -> bool:
    return getattr(value, "shape", None) == getattr(copied, "shape", None) and getattr(
        value, "dtype", None
    ) == getattr(copied, "dtype", None)
