"""Where datasets live on disk, and how a converted dataset proves it is complete.

A converted dataset is a directory holding ``data/`` (the TED tensordict as
memory-mapped files), ``metadata.json`` (id, source, sizes, spec) and the completion
marker ``.complete``, written last.  Conversions are written into a temporary sibling
directory that is renamed into place once complete, so a crash leaves either the
previous dataset or nothing, never a half-written one under the final name.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = [
    "DATA_DIR",
    "MARKER",
    "META_FILE",
    "ROOT_ENV",
    "default_root",
    "is_complete",
    "new_workdir",
    "publish",
    "read_metadata",
    "remove_tree",
    "write_metadata",
]

ROOT_ENV = "RL_DATASETS_ROOT"
DATA_DIR = "data"
META_FILE = "metadata.json"
MARKER = ".complete"


def default_root(source: str) -> Path:
    """The default root of a source: ``$RL_DATASETS_ROOT/<source>``, else the user cache.

    Examples:
        >>> import os
        >>> os.environ["RL_DATASETS_ROOT"] = "/data/rl"
        >>> default_root("d4rl").as_posix()
        '/data/rl/d4rl'
        >>> del os.environ["RL_DATASETS_ROOT"]
    """
    base = os.environ.get(ROOT_ENV)
    if base:
        return Path(base).expanduser() / source
    cache = os.environ.get("XDG_CACHE_HOME") or Path("~/.cache").expanduser()
    return Path(cache) / "rl_stack" / "datasets" / source


def is_complete(path: Path) -> bool:
    """Whether ``path`` holds a converted dataset whose marker was written."""
    return (path / MARKER).is_file()


def write_metadata(path: Path, metadata: dict[str, Any]) -> None:
    (path / META_FILE).write_text(json.dumps(metadata, indent=1, sort_keys=True, default=str))


def read_metadata(path: Path, owner: str) -> dict[str, Any]:
    """Read ``metadata.json`` of a converted dataset.

    Raises:
        ValueError: if the file is not valid JSON (the directory is corrupt).
    """
    file = path / META_FILE
    try:
        return json.loads(file.read_text())
    except FileNotFoundError:
        return {}
    except json.JSONDecodeError as err:
        raise ValueError(
            f"{owner} found a corrupt {file} ({err}). Rebuild the dataset with download='force'."
        ) from err


@contextmanager
def new_workdir(final: Path) -> Iterator[Path]:
    """A fresh temporary directory beside ``final``, removed unless :func:`publish` moved it."""
    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".partial", dir=final.parent))
    try:
        yield work
    finally:
        remove_tree(work)


def publish(work: Path, final: Path) -> None:
    """Write the marker into ``work`` and move it to ``final``, replacing what was there.

    The old directory is first renamed aside, then removed once the new one is in place:
    at every moment ``final`` is either the old complete dataset or the new one.
    """
    (work / MARKER).write_text("complete\n")
    old = None
    if final.exists():
        old = final.with_name(f".{final.name}.old-{os.getpid()}")
        remove_tree(old)
        final.rename(old)
    work.rename(final)
    if old is not None:
        remove_tree(old)


def remove_tree(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
