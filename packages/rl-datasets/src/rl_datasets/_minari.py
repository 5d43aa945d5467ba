"""Minari: a Minari dataset, downloaded and read through the ``minari`` package where it is
installed, else fetched from the Farama hub repos with huggingface_hub and read with h5py."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

from tensordict import TensorDictBase

from rl_datasets import _paths
from rl_datasets._backends import EXTRA_HUB, require
from rl_datasets._base import BaseDatasetExperienceReplay
from rl_datasets._episodes import write_episodes
from rl_datasets._hub import hub_files, hub_url
from rl_datasets._ids import check_dataset_id
from rl_datasets._minari_read import (
    h5py_episodes,
    import_minari,
    minari_datasets_path,
    minari_episodes,
)

__all__ = ["MinariExperienceReplay"]

HUB_OWNER = "farama-minari"
# minari's own default remote (its MINARI_REMOTE variable overrides it)
DEFAULT_REMOTE = f"hf://{HUB_OWNER}"
# written in the download folder once minari.download_dataset has returned
_DOWNLOADED = ".minari-downloaded"

# Datasets published by Farama (namespace/name-version)
_KNOWN = [
    f"D4RL/{task}/{kind}-v2"
    for task in ("door", "hammer", "pen", "relocate")
    for kind in ("human", "cloned", "expert")
]
_KNOWN += [f"D4RL/kitchen/{kind}-v2" for kind in ("complete", "partial", "mixed")]
_KNOWN += [
    f"D4RL/pointmaze/{size}{dense}-v2"
    for size in ("open", "umaze", "medium", "large")
    for dense in ("", "-dense")
]
_KNOWN += [
    f"D4RL/antmaze/{kind}-v1"
    for kind in (
        "umaze",
        "umaze-diverse",
        "medium-play",
        "medium-diverse",
        "large-play",
        "large-diverse",
    )
]
_KNOWN += [
    f"mujoco/{env}/{kind}-v0"
    for env in (
        "ant",
        "halfcheetah",
        "hopper",
        "humanoid",
        "humanoidstandup",
        "invertedpendulum",
        "inverteddoublependulum",
        "pusher",
        "reacher",
        "swimmer",
        "walker2d",
    )
    for kind in ("expert", "medium", "simple")
]


class MinariExperienceReplay(BaseDatasetExperienceReplay):
    """Minari Experience replay dataset.

    The Minari dataset ``dataset_id`` (``"namespace/name-vN"``) is read from Minari's
    layout: ``data/metadata.json`` and ``data/main_data.hdf5`` with one ``episode_<n>``
    group per episode. Where the ``minari`` package is installed
    (``pip install 'rl-datasets[minari]'``), it does the work: ``minari.download_dataset``
    fetches the dataset from Minari's remote (``MINARI_REMOTE``, by default the Farama
    repos on the Hugging Face hub, whose endpoint ``HF_ENDPOINT`` moves), and
    ``minari.load_dataset`` and its episode iterator read it. Otherwise the files are
    fetched from the Farama hub repos (``farama-minari/<namespace>``) with
    ``huggingface_hub`` and read with h5py. Both readers feed the same conversion into
    TED memory-mapped tensors, once: Minari stores ``T + 1`` observations per episode, so
    ``("next", "observation")`` is exact at episode ends; ``terminations``/``truncations``
    give the ``next`` done flags; ``"episode"`` holds the episode number; dict spaces
    nest, tuple spaces become ``_index_<i>`` entries; text entries are left out. Minari's
    metadata goes to ``metadata["minari"]`` and ``metadata["reader"]`` says which reader
    ran (``"minari"`` or ``"h5py"``). Image observations that Minari stored JPEG-encoded
    are decoded only by the ``minari`` reader.

    Args:
        dataset_id (str): one of :attr:`available_datasets`.
        batch_size (int): the batch size of :meth:`sample`.

    Keyword Args:
        root (Path or str, optional): the folder of the converted datasets. Defaults to
            ``$RL_DATASETS_ROOT/minari`` or ``~/.cache/rl_stack/datasets/minari``.
        download (bool or str, optional): download and convert if needed; ``"force"``
            converts again. Defaults to ``True``.
        sampler (Sampler, optional): Defaults to ``RandomSampler()``.
        writer (Writer, optional): Defaults to :class:`~rl_replay.ImmutableDatasetWriter`.
        collate_fn (callable, optional): Defaults to ``None``.
        pin_memory (bool, optional): Defaults to ``False``.
        prefetch (int, optional): Defaults to ``None``.
        transform (Transform, optional): applied to samples. Defaults to ``None``.
        split_trajs (bool, optional): store padded trajectories. Defaults to ``False``.
        load_from_local_minari (bool, optional): read the dataset from the local Minari
            folder (``$MINARI_DATASETS_PATH`` or ``~/.minari/datasets``, through
            ``minari.load_dataset`` where installed) instead of downloading it, and convert
            it again. Defaults to ``False``.

    Raises:
        ValueError: for an unknown ``dataset_id`` (close ids are suggested).
        ImportError: without ``minari``, and without huggingface_hub and h5py
            (``pip install 'rl-datasets[minari]'`` or ``'rl-datasets[hub]'``).
        ConnectionError: if the remote cannot be reached.

    Examples:
        >>> data = MinariExperienceReplay("D4RL/door/human-v2", batch_size=32)  # doctest: +SKIP
        >>> data.sample()["next", "observation"].shape  # doctest: +SKIP
        torch.Size([32, 39])
    """

    _source = "minari"
    available_datasets: ClassVar[list[str]] = sorted(_KNOWN)

    def __init__(
        self,
        dataset_id: str,
        batch_size: int,
        *,
        root: str | Path | None = None,
        download: bool | str = True,
        sampler: Any = None,  # Any: a Sampler
        writer: Any = None,  # Any: a Writer
        collate_fn: Callable | None = None,
        pin_memory: bool = False,
        prefetch: int | None = None,
        transform: Callable | None = None,
        split_trajs: bool = False,
        load_from_local_minari: bool = False,
    ) -> None:
        if not load_from_local_minari:
            check_dataset_id(type(self).__name__, dataset_id, self.available_datasets)
        self.load_from_local_minari = load_from_local_minari
        self._open(
            dataset_id,
            root=root,
            download=download if not load_from_local_minari else "force",
            split_trajs=split_trajs,
            writer=writer,
            batch_size=batch_size,
            sampler=sampler,
            collate_fn=collate_fn,
            pin_memory=pin_memory,
            prefetch=prefetch,
            transform=transform,
        )

    def _convert(self, downloads: Path, dest: Path) -> tuple[TensorDictBase, dict[str, Any]]:
        owner = type(self).__name__
        minari = import_minari()
        if minari is not None:
            return self._convert_with_minari(minari, downloads, dest)
        h5py = require("h5py", extra=EXTRA_HUB, owner=owner)
        if self.load_from_local_minari:
            folder = _local_minari_path() / self.dataset_id / "data"
            source = [str(folder)]
            if not (folder / "main_data.hdf5").is_file():
                raise FileNotFoundError(
                    f"{owner} found no {folder / 'main_data.hdf5'} in the local Minari folder. "
                    "Set MINARI_DATASETS_PATH, or pass load_from_local_minari=False to download."
                )
        else:
            namespace, rest = self.dataset_id.split("/", 1)
            repo = f"{HUB_OWNER}/{namespace}"
            files = hub_files(repo, rest, downloads, owner=owner, suffixes=(".hdf5", ".json"))
            folder = files[0].parent
            source = [hub_url(repo, rest)]
        path = folder / "main_data.hdf5"
        try:
            handle = h5py.File(path, "r")
        except OSError as err:
            path.unlink(missing_ok=not self.load_from_local_minari)
            raise ValueError(
                f"{owner}: {path} is not a readable HDF5 file ({err}). Retry the download."
            ) from err
        with handle:
            data = write_episodes(dest, h5py_episodes(handle), owner=owner)
        return data, {"source": source, "minari": _metadata(folder), "reader": "h5py"}

    def _convert_with_minari(
        self, minari: ModuleType, downloads: Path, dest: Path
    ) -> tuple[TensorDictBase, dict[str, Any]]:
        """Download and read through the ``minari`` package (its remote, storage and episodes)."""
        owner = type(self).__name__
        if self.load_from_local_minari:
            source = [str(_local_minari_path() / self.dataset_id)]
            dataset = _load(minari, self.dataset_id, owner, local=True)
        else:
            remote = os.environ.get("MINARI_REMOTE") or DEFAULT_REMOTE
            source = [f"{remote.rstrip('/')}/{self.dataset_id}"]
            with minari_datasets_path(downloads):
                _download(minari, self.dataset_id, downloads, remote, owner)
                dataset = _load(minari, self.dataset_id, owner, local=False)
        folder = Path(dataset.storage.data_path)
        try:
            episodes = minari_episodes(dataset)
        except OSError as err:
            if not self.load_from_local_minari:  # fetched again on the next try
                (downloads / _DOWNLOADED).unlink(missing_ok=True)
                _paths.remove_tree(downloads / self.dataset_id)
            raise ValueError(
                f"{owner}: {folder / 'main_data.hdf5'} is not a readable HDF5 file ({err}). "
                "Retry the download."
            ) from err
        data = write_episodes(dest, episodes, owner=owner)
        return data, {"source": source, "minari": _metadata(folder), "reader": "minari"}


def _metadata(folder: Path) -> dict[str, Any]:
    """The dataset's ``data/metadata.json`` (Minari's own metadata), or ``{}``."""
    meta_file = folder / "metadata.json"
    return json.loads(meta_file.read_text()) if meta_file.is_file() else {}


def _download(minari: ModuleType, dataset_id: str, home: Path, remote: str, owner: str) -> None:
    """``minari.download_dataset`` into ``home`` (the current ``MINARI_DATASETS_PATH``).

    Minari skips a dataset whose folder exists, so a folder left by an interrupted download
    (no ``DOWNLOADED`` marker) is removed first and fetched again.
    """
    marker = home / _DOWNLOADED
    if marker.is_file():
        return
    _paths.remove_tree(home / dataset_id)
    try:
        minari.download_dataset(dataset_id)
    except ValueError as err:  # minari's answer: no such dataset/version, incompatible version
        raise ValueError(f"{owner}: minari could not download {dataset_id!r}: {err}") from err
    except ImportError as err:
        raise _missing(owner, err) from err
    except Exception as err:  # the hub client's network and HTTP errors have many types
        raise ConnectionError(
            f"{owner} could not download {dataset_id!r} from the Minari remote {remote} "
            f"({type(err).__name__}: {err}). Check the network, HF_ENDPOINT or MINARI_REMOTE, "
            "then retry."
        ) from err
    marker.touch()


def _load(minari: ModuleType, dataset_id: str, owner: str, *, local: bool) -> Any:
    """``minari.load_dataset(dataset_id)`` from the current ``MINARI_DATASETS_PATH``."""
    try:
        return minari.load_dataset(dataset_id)
    except FileNotFoundError as err:
        if not local:
            raise
        raise FileNotFoundError(
            f"{owner} found no dataset {dataset_id!r} in the local Minari folder "
            f"{_local_minari_path()} ({err}). Set MINARI_DATASETS_PATH, or pass "
            "load_from_local_minari=False to download."
        ) from err
    except ImportError as err:
        raise _missing(owner, err) from err


def _missing(owner: str, err: ImportError) -> ImportError:
    return ImportError(
        f"{owner}: minari is installed but cannot read the dataset ({err}). Install its "
        "readers with: pip install 'rl-datasets[minari]'"
    )


def _local_minari_path() -> Path:
    return Path(os.environ.get("MINARI_DATASETS_PATH") or Path("~/.minari/datasets").expanduser())
