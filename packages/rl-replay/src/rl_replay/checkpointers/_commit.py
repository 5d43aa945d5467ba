"""Atomic checkpoint directories: one snapshot per dump, committed by replacing a pointer.

A buffer checkpoint at ``path`` is a directory holding

* ``CURRENT``: a checksummed JSON file naming the committed snapshot;
* ``snapshot-<pid>-<random>/``: the files of one dump.

A dump writes a new snapshot directory, then replaces ``CURRENT`` with
``os.replace`` -- a single atomic step: a crash before it leaves the previous
checkpoint in place, a crash after it leaves the new one.  Temporaries left by
killed dumps (snapshots ``CURRENT`` does not name, ``CURRENT.tmp-*`` files, and the
``<name>.tmp-*`` / ``<name>.old-*`` siblings of older versions) are removed by the
next dump, unless the process that made them is still running.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

from rl_replay.checkpointers._files import read_json, write_json

__all__ = ["POINTER", "committed_snapshot", "snapshot_directory"]

POINTER = "CURRENT"
_SNAPSHOT = re.compile(r"^snapshot-(?P<pid>[0-9]+)-[0-9a-f]+$")
_POINTER_TMP = re.compile(rf"^{POINTER}\.tmp-(?P<pid>[0-9]+)-[0-9a-f]+$")
# files of checkpoints written by rl-replay 0.1 straight into ``path``
_LEGACY = (".complete", "buffer_metadata.json", "storage", "sampler", "writer")


@contextlib.contextmanager
def snapshot_directory(path: Path) -> Iterator[Path]:
    """Yield a fresh snapshot directory under ``path``; commit it if the block succeeds.

    On failure the snapshot is removed and the committed checkpoint is untouched.
    """
    path.mkdir(parents=True, exist_ok=True)
    token = f"{os.getpid()}-{uuid.uuid4().hex}"
    snapshot = path / f"snapshot-{token}"
    snapshot.mkdir()
    try:
        yield snapshot
        pointer_tmp = path / f"{POINTER}.tmp-{token}"
        write_json(pointer_tmp, {"snapshot": snapshot.name})
        os.replace(pointer_tmp, path / POINTER)  # the commit: one atomic step
    except BaseException:
        shutil.rmtree(snapshot, ignore_errors=True)
        with contextlib.suppress(OSError):
            (path / f"{POINTER}.tmp-{token}").unlink()
        raise
    remove_stale(path, keep=snapshot.name)


def committed_snapshot(path: Path, owner: str) -> Path:
    """The snapshot directory the checkpoint ``path`` commits to.

    Raises:
        FileNotFoundError: if ``path``, its pointer or the snapshot it names is missing.
        ValueError: if the pointer is corrupt or names something that is not a snapshot.
    """
    if not path.is_dir():
        raise FileNotFoundError(
            f"{owner}.loads expected a checkpoint directory at {path}, which does not exist."
        )
    pointer = path / POINTER
    if not pointer.is_file():
        hint = (
            " It holds a checkpoint of an older rl-replay version, which this version does not "
            "read (it could hold pickles); dump it again with this version."
            if (path / ".complete").exists()
            else " No dump into it finished; dump it again."
        )
        raise FileNotFoundError(
            f"{owner}.loads expected the pointer file {pointer}, which does not exist.{hint}"
        )
    name = read_json(pointer, owner).get("snapshot")
    if not isinstance(name, str) or not _SNAPSHOT.match(name):
        raise ValueError(
            f"{owner}.loads expected {pointer} to name a snapshot directory, found {name!r}. "
            "The checkpoint is corrupt; dump it again."
        )
    snapshot = path / name
    if not snapshot.is_dir():
        raise FileNotFoundError(
            f"{owner}.loads expected the snapshot directory {snapshot} named by {pointer}, which "
            "does not exist. The checkpoint is incomplete; dump it again."
        )
    return snapshot


def remove_stale(path: Path, keep: str) -> None:
    """Remove what killed dumps left in and next to ``path`` (not what live processes write)."""
    for child in path.iterdir():
        match = _SNAPSHOT.match(child.name) or _POINTER_TMP.match(child.name)
        if match is None or child.name == keep or _alive(int(match["pid"]), child):
            continue
        _remove(child)
    if (path / ".complete").exists():  # the previous dump used the old layout
        for name in _LEGACY:
            _remove(path / name)
    for prefix in (f"{path.name}.tmp-", f"{path.name}.old-"):
        for sibling in path.parent.glob(f"{prefix}*"):
            _remove(sibling)


def _alive(pid: int, child: Path) -> bool:
    if pid == os.getpid():
        return False  # this process commits one dump at a time: anything else of ours is stale
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove(child: Path) -> None:
    if child.is_dir() and not child.is_symlink():
        shutil.rmtree(child, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            child.unlink()
