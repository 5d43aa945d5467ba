"""Downloads from the Hugging Face hub, through ``huggingface_hub`` (extra ``hub``).

The hub client resumes interrupted files and checks them against the hub's metadata; its
endpoint follows ``HF_ENDPOINT`` (a mirror, or a local server in tests).
"""

from __future__ import annotations

from pathlib import Path

from rl_datasets._backends import EXTRA_HUB, require

__all__ = ["hub_files", "hub_url"]


def hub_url(repo_id: str, prefix: str) -> str:
    constants = require("huggingface_hub.constants", extra=EXTRA_HUB, owner="rl_datasets")
    return f"{constants.ENDPOINT.rstrip('/')}/datasets/{repo_id}/tree/main/{prefix}"


def hub_files(
    repo_id: str, prefix: str, dest: Path, *, owner: str, suffixes: tuple[str, ...]
) -> list[Path]:
    """Download the files of dataset repo ``repo_id`` under ``prefix`` into ``dest``.

    Returns the local paths of the downloaded files ending with one of ``suffixes``, sorted.

    Raises:
        ImportError: without huggingface_hub (``pip install 'rl-datasets[hub]'``).
        ConnectionError: if the hub cannot be reached or refuses the request.
        ValueError: if the repository holds no such file under ``prefix``.
    """
    hub = require("huggingface_hub", extra=EXTRA_HUB, owner=owner)
    patterns = [f"{prefix.rstrip('/')}/**{suffix}" for suffix in suffixes]
    patterns += [f"{prefix.rstrip('/')}/*{suffix}" for suffix in suffixes]
    try:
        hub.snapshot_download(
            repo_id=repo_id,
            repo_type="dataset",
            allow_patterns=patterns,
            local_dir=str(dest),
        )
    except Exception as err:  # the hub client's network and HTTP errors have many types
        raise ConnectionError(
            f"{owner} could not download {prefix!r} from the hub dataset {repo_id} at "
            f"{hub_url(repo_id, prefix)} ({type(err).__name__}: {err}). Check the network or "
            "HF_ENDPOINT, then retry: finished files are kept."
        ) from err
    base = dest / prefix
    files = sorted(p for p in base.rglob("*") if p.is_file() and p.name.endswith(suffixes))
    if not files:
        raise ValueError(
            f"{owner}: the hub dataset {repo_id} has no {'/'.join(suffixes)} file under "
            f"{prefix!r}. Check the dataset id against {owner}.available_datasets."
        )
    return files
