"""Resumable, checked HTTP downloads for the sources served as plain files.

A file is fetched into ``<name>.part`` and renamed to ``<name>`` only once its size (the
server's ``Content-Length``) and, when the source publishes one, its SHA-256 match.  A
``.part`` left by an interrupted run is resumed with an HTTP ``Range`` request.  The free
disk space is checked against the announced size before the first byte is written.
"""

from __future__ import annotations

import errno
import hashlib
import http.client
import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from tqdm.auto import tqdm

__all__ = ["CHUNK", "TIMEOUT_ENV", "download_file", "download_files", "sha256_of"]

CHUNK = 1 << 20
TIMEOUT_ENV = "RL_DATASETS_TIMEOUT"


def _timeout() -> float:
    return float(os.environ.get(TIMEOUT_ENV, "60"))


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def _open(url: str, offset: int, owner: str) -> http.client.HTTPResponse | None:
    """Open ``url`` from byte ``offset``; ``None`` when the server says nothing is left."""
    headers = {"User-Agent": "rl-datasets", "Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    try:
        return urllib.request.urlopen(
            urllib.request.Request(url, headers=headers), timeout=_timeout()
        )
    except urllib.error.HTTPError as err:
        if err.code == 416 and offset:  # the .part already holds every byte
            return None
        if err.code == 404:
            raise FileNotFoundError(
                f"{owner} could not download {url}: the server has no such file (HTTP 404). "
                "Check the dataset id and the source URL."
            ) from err
        raise ConnectionError(
            f"{owner} could not download {url}: the server answered HTTP {err.code} "
            f"({err.reason}). Check the dataset id and the source URL, then retry."
        ) from err
    except (urllib.error.URLError, TimeoutError, OSError) as err:
        raise ConnectionError(
            f"{owner} could not reach {url} ({err}). Check the network connection (or the "
            "source URL setting), then retry: a partial download is resumed."
        ) from err


def _check_space(folder: Path, needed: int, url: str, owner: str) -> None:
    free = shutil.disk_usage(folder).free
    if needed > free:
        raise OSError(
            errno.ENOSPC,
            f"{owner} needs {needed} bytes to download {url} into {folder}, found {free} free. "
            "Free some space or pass root= on a larger disk.",
        )


def download_file(
    url: str,
    dest: Path,
    *,
    owner: str,
    sha256: str | None = None,
    progress: bool = True,
) -> Path:
    """Download ``url`` to ``dest`` (resuming ``dest.part``); return ``dest``.

    Raises:
        FileNotFoundError: if the server has no such file (HTTP 404).
        ConnectionError: if the server cannot be reached or answers another error.
        OSError: if the disk has less free space than the announced size.
        ValueError: if the download is truncated or its SHA-256 differs (the message names
            the file; a truncated ``.part`` is kept and resumed by the next call).
    """
    dest = Path(dest)
    if dest.is_file() and (sha256 is None or sha256_of(dest) == sha256):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    have = part.stat().st_size if part.is_file() else 0
    response = _open(url, have, owner)
    total = have
    if response is not None:
        with response:
            if have and response.status != 206:  # the server ignored the range: start over
                have = 0
            length = response.headers.get("Content-Length")
            total = have + int(length) if length is not None else None
            if total is not None:
                _check_space(dest.parent, total - have, url, owner)
            _stream(response, part, have, total, url, dest.name, owner, progress)
        size = part.stat().st_size
        if total is not None and size != total:
            raise ValueError(
                f"{owner}: the download of {dest.name} from {url} is truncated: got {size} of "
                f"{total} bytes. Retry: the download resumes from byte {size}."
            )
    if sha256 is not None:
        actual = sha256_of(part)
        if actual != sha256:
            part.unlink()
            raise ValueError(
                f"{owner}: {dest.name} downloaded from {url} is corrupt: expected SHA-256 "
                f"{sha256}, got {actual}. The file was removed; retry the download."
            )
    part.rename(dest)
    return dest


def _stream(
    response: http.client.HTTPResponse,
    part: Path,
    have: int,
    total: int | None,
    url: str,
    name: str,
    owner: str,
    progress: bool,
) -> None:
    with (
        open(part, "ab" if have else "wb") as file,
        tqdm(
            total=total,
            initial=have,
            unit="B",
            unit_scale=True,
            desc=name,
            disable=not progress,
            leave=False,
        ) as bar,
    ):
        try:
            for block in iter(lambda: response.read(CHUNK), b""):
                file.write(block)
                bar.update(len(block))
        except (http.client.IncompleteRead, TimeoutError, OSError) as err:
            file.flush()
            raise ValueError(
                f"{owner}: the download of {name} from {url} stopped after "
                f"{file.tell()} bytes ({type(err).__name__}). Retry: it resumes from there."
            ) from err


def download_files(
    items: Sequence[tuple[str, Path]], *, owner: str, progress: bool = True
) -> list[Path]:
    """Download ``(url, dest)`` pairs in order, with a bar counting files."""
    out = []
    with tqdm(
        total=len(items), unit="file", desc=owner, disable=not progress or len(items) < 2
    ) as bar:
        for url, dest in items:
            out.append(download_file(url, dest, owner=owner, progress=progress))
            bar.update(1)
    return out
