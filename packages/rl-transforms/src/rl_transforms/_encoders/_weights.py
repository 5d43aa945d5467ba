"""Published weights of the visual encoders: where they live and how they are fetched.

Files are downloaded once into a cache folder (``download_path``, else
``<torch hub dir>/checkpoints``) and read with ``torch.load(weights_only=True)``:
loading never runs code from the file. A download that stalls fails after
``RL_TRANSFORMS_DOWNLOAD_TIMEOUT`` seconds without data (default 60) instead of
hanging; it is written to ``<file>.part`` and renamed once complete, so an
interrupted one never leaves a truncated checkpoint in the cache.
"""

from __future__ import annotations

import os
import shutil
import urllib.request
from typing import Any

import torch

TIMEOUT_ENV = "RL_TRANSFORMS_DOWNLOAD_TIMEOUT"

#: name -> (url, file name in the cache, entry of the checkpoint holding the state dict)
WEIGHT_URLS: dict[str, tuple[str, str, str]] = {
    "r3m_18": ("https://pytorch.s3.amazonaws.com/models/rl/r3m/r3m_18.pt", "r3m_18.pt", "r3m"),
    "r3m_34": ("https://pytorch.s3.amazonaws.com/models/rl/r3m/r3m_34.pt", "r3m_34.pt", "r3m"),
    "r3m_50": ("https://pytorch.s3.amazonaws.com/models/rl/r3m/r3m_50.pt", "r3m_50.pt", "r3m"),
    "vip_50": ("https://pytorch.s3.amazonaws.com/models/rl/vip/model.pt", "vip_50.pt", "vip"),
    "vc1_base": ("https://dl.fbaipublicfiles.com/eai-vc/vc1_vitb.pth", "vc1_vitb.pth", "model"),
    "vc1_large": ("https://dl.fbaipublicfiles.com/eai-vc/vc1_vitl.pth", "vc1_vitl.pth", "model"),
}


def cache_dir(download_path: str | os.PathLike | None) -> str:
    """The folder the weights are downloaded to."""
    if download_path is not None:
        return os.fspath(download_path)
    return os.path.join(torch.hub.get_dir(), "checkpoints")


def fetch_state_dict(
    name: str, download_path: str | os.PathLike | None = None, *, owner: str
) -> dict[str, torch.Tensor]:
    """Download (once) the published checkpoint ``name`` and return its state dict.

    Raises:
        KeyError: if ``name`` is not a known checkpoint, or the file lacks its entry.
        RuntimeError: if the download fails (the message names the url and the cache).
    """
    if name not in WEIGHT_URLS:
        raise KeyError(
            f"{owner}: no published weights named {name!r}. Known: {sorted(WEIGHT_URLS)}."
        )
    url, file_name, entry = WEIGHT_URLS[name]
    folder = cache_dir(download_path)
    path = os.path.join(folder, file_name)
    if not os.path.exists(path):
        try:
            _download(url, path)
        except OSError as err:  # URLError, HTTPError, timeouts, disk errors
            raise RuntimeError(
                f"{owner} could not download its weights from {url} into {folder}: {err}. Check "
                f"the network (a stalled transfer fails after {TIMEOUT_ENV} seconds, default "
                f"60), or place the file there as {file_name!r}."
            ) from err
    checkpoint: Any = torch.load(path, map_location="cpu", weights_only=True)  # Any: a dict
    if not isinstance(checkpoint, dict) or entry not in checkpoint:
        found = sorted(checkpoint) if isinstance(checkpoint, dict) else type(checkpoint).__name__
        raise KeyError(
            f"{owner} expected the checkpoint {os.path.join(folder, file_name)} to hold an "
            f"{entry!r} entry (the published layout), found {found}. Delete the file to download "
            f"it again."
        )
    return checkpoint[entry]


def _download(url: str, path: str) -> None:
    """Fetch ``url`` into ``path`` through ``path.part``; every read waits at most the timeout."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    timeout = float(os.environ.get(TIMEOUT_ENV, "60"))
    request = urllib.request.Request(url, headers={"User-Agent": "rl-transforms"})
    partial = f"{path}.part"
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            expected = response.headers.get("Content-Length")
            with open(partial, "wb") as out:
                shutil.copyfileobj(response, out, 1 << 20)
                got = out.tell()
        if expected is not None and got != int(expected):
            raise ConnectionError(f"the transfer ended after {got} of {expected} bytes")
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)
