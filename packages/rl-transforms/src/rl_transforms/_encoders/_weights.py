"""Published weights of the visual encoders: where they live and how they are fetched.

Files are downloaded once into a cache folder (``download_path``, else
``<torch hub dir>/checkpoints``) and read with ``torch.load(weights_only=True)``:
loading never runs code from the file.
"""

from __future__ import annotations

import os
from typing import Any

import torch

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
    try:
        checkpoint: Any = torch.hub.load_state_dict_from_url(  # Any: a dict read from the file
            url,
            model_dir=folder,
            map_location="cpu",
            progress=False,
            file_name=file_name,
            weights_only=True,
        )
    except OSError as err:  # URLError, HTTPError, disk errors
        raise RuntimeError(
            f"{owner} could not download its weights from {url} into {folder}: {err}. Check the "
            f"network, or place the file there as {file_name!r}."
        ) from err
    if not isinstance(checkpoint, dict) or entry not in checkpoint:
        found = sorted(checkpoint) if isinstance(checkpoint, dict) else type(checkpoint).__name__
        raise KeyError(
            f"{owner} expected the checkpoint {os.path.join(folder, file_name)} to hold an "
            f"{entry!r} entry (the published layout), found {found}. Delete the file to download "
            f"it again."
        )
    return checkpoint[entry]
