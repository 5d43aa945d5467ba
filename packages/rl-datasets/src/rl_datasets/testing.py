"""Offline test helpers: a local HTTP file server and miniature source files.

Tests, benchmarks and the docs run the real download and conversion code against
files served from ``127.0.0.1``: :class:`LocalFileServer` serves a folder (with HTTP
``Range`` support, so resumed downloads are exercised) and, when given hub
repositories, answers the few Hugging Face hub endpoints the hub client calls.
:func:`write_d4rl_file` writes a D4RL-layout HDF5 file of any size.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import numpy as np

__all__ = ["LocalFileServer", "write_d4rl_file"]

_COMMIT = "0" * 40


class LocalFileServer:
    """Serve ``directory`` over HTTP on ``127.0.0.1`` from a background thread.

    Files are answered with ``Content-Length``, ``ETag`` and ``Range`` support.  Each
    request is logged in :attr:`requests` as ``(method, path, range header)``.
    ``truncate`` maps a served path to a byte count after which the connection is cut
    (a download that breaks midway).  ``hub_repos`` maps ``"datasets/<owner>/<name>"``
    to a folder: the server then answers the hub client's repository-info,
    file-listing and file-resolve requests for it, and lists it in ``/api/datasets``
    (filtered by ``author`` and ``search``, as the hub does).

    Examples:
        >>> import tempfile, urllib.request
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = (folder / "a.bin").write_bytes(b"0123456789")
        >>> with LocalFileServer(folder) as server:
        ...     request = urllib.request.Request(server.url + "a.bin", headers={"Range": "bytes=4-"})
        ...     urllib.request.urlopen(request).read()
        b'456789'
    """

    def __init__(
        self,
        directory: str | Path,
        *,
        hub_repos: dict[str, str | Path] | None = None,
        truncate: dict[str, int] | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.hub_repos = hub_repos if hub_repos is not None else {}  # read per request
        self.truncate = dict(truncate or {})
        self.requests: list[tuple[str, str, str | None]] = []
        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL, ending with ``/``."""
        if self._server is None:
            raise RuntimeError("LocalFileServer is not started: use it in a with block.")
        return f"http://127.0.0.1:{self._server.server_port}/"

    def __enter__(self) -> LocalFileServer:
        owner = self

        class Handler(_Handler):
            server_owner = owner

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=10)
            self._server = None


class _Handler(http.server.BaseHTTPRequestHandler):
    server_owner: LocalFileServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return None

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def do_GET(self) -> None:
        self._answer(head=False)

    def _answer(self, head: bool) -> None:
        owner = self.server_owner
        path = unquote(urlsplit(self.path).path)
        owner.requests.append((self.command, path, self.headers.get("Range")))
        if path == "/api/datasets":
            query = parse_qs(urlsplit(self.path).query)
            return self._json(_list_datasets(owner.hub_repos, query), head)
        for prefix, folder in list(owner.hub_repos.items()):
            folder = Path(folder)
            api = f"/api/{prefix}"
            if path.startswith(api + "/revision/") or path == api:
                return self._json(_repo_info(prefix, folder), head)
            if path.startswith(api + "/tree/"):
                return self._json(_tree(folder), head)
            resolve = f"/{prefix}/resolve/"
            if path.startswith(resolve):
                relative = path[len(resolve) :].split("/", 1)[1]
                return self._file(folder / relative, path, head, hub=True)
        return self._file(owner.directory / path.lstrip("/"), path, head, hub=False)

    def _json(self, payload: Any, head: bool) -> None:
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Repo-Commit", _COMMIT)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _file(self, file: Path, path: str, head: bool, hub: bool) -> None:
        if not file.is_file():
            self.send_response(404)
            self.send_header("Content-Length", "0")
            if hub:
                self.send_header("X-Error-Code", "EntryNotFound")
            self.end_headers()
            return
        data = file.read_bytes()
        start, status = 0, 200
        requested = self.headers.get("Range")
        if requested and requested.startswith("bytes="):
            start = int(requested[len("bytes=") :].split("-")[0] or 0)
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        body = data[start:]
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        if hub:
            self.send_header("X-Repo-Commit", _COMMIT)
        self.end_headers()
        if head:
            return
        cut = self.server_owner.truncate.get(path)
        if cut is not None and start < cut:
            self.wfile.write(body[: cut - start])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def _list_datasets(repos: dict[str, Any], query: dict[str, list[str]]) -> list[dict[str, Any]]:
    authors = query.get("author", [])
    searches = [s.lower() for s in query.get("search", [])]
    out = []
    for prefix in list(repos):
        kind, _, repo_id = prefix.partition("/")
        author = repo_id.split("/", 1)[0]
        if kind != "datasets" or (authors and author not in authors):
            continue
        if all(s in repo_id.lower() for s in searches):
            out.append({"id": repo_id, "author": author, "sha": _COMMIT, "private": False})
    return out


def _repo_info(prefix: str, folder: Path) -> dict[str, Any]:
    siblings = []
    for file in _files(folder):
        data = file.read_bytes()
        siblings.append(
            {
                "rfilename": file.relative_to(folder).as_posix(),
                "size": len(data),
                "blobId": hashlib.sha1(data).hexdigest(),
                "lfs": {
                    "sha256": hashlib.sha256(data).hexdigest(),
                    "size": len(data),
                    "pointerSize": 134,
                },
            }
        )
    return {"id": prefix.split("/", 1)[1], "sha": _COMMIT, "siblings": siblings, "private": False}


def _tree(folder: Path) -> list[dict[str, Any]]:
    out = []
    for file in _files(folder):
        data = file.read_bytes()
        out.append(
            {
                "type": "file",
                "path": file.relative_to(folder).as_posix(),
                "size": len(data),
                "oid": hashlib.sha1(data).hexdigest(),
                "lfs": {
                    "oid": hashlib.sha256(data).hexdigest(),
                    "size": len(data),
                    "pointerSize": 134,
                },
            }
        )
    return out


def write_d4rl_file(
    path: str | Path,
    steps: int,
    *,
    obs_dim: int = 4,
    action_dim: int = 2,
    terminals: list[int] = (),
    timeouts: list[int] = (),
    infos: bool = True,
    compression: str | None = "gzip",
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """Write a D4RL-layout HDF5 file; return its arrays (``"infos/qpos"``-style keys).

    The datasets are those of the D4RL files: ``observations``, ``actions``,
    ``rewards``, ``terminals``, ``timeouts``, ``infos/*`` and ``metadata/*``, with the
    dtypes D4RL uses (float32 arrays, bool flags).
    """
    import h5py

    rng = np.random.default_rng(seed)
    arrays = {
        "observations": rng.standard_normal((steps, obs_dim)).astype(np.float32),
        "actions": rng.uniform(-1, 1, (steps, action_dim)).astype(np.float32),
        "rewards": rng.standard_normal(steps).astype(np.float32),
        "terminals": np.zeros(steps, dtype=bool),
        "timeouts": np.zeros(steps, dtype=bool),
    }
    arrays["terminals"][list(terminals)] = True
    arrays["timeouts"][list(timeouts)] = True
    if infos:
        arrays["infos/qpos"] = rng.standard_normal((steps, 2))
        arrays["infos/goal"] = rng.standard_normal((steps, 2)).astype(np.float32)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(path, "w") as file:
        for key, value in arrays.items():
            file.create_dataset(key, data=value, compression=compression)
        file.create_dataset("metadata/algorithm", data=b"SAC")
        file.create_dataset("metadata/policy/fc0/weight", data=np.ones((2, 2), np.float32))
    return arrays
