"""Minari: the ``main_data.hdf5`` of a Minari dataset, fetched from the Farama hub repos."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from tensordict import TensorDictBase

from rl_datasets._backends import EXTRA_HUB, require
from rl_datasets._base import BaseDatasetExperienceReplay
from rl_datasets._episodes import (
    EpisodeSource,
    h5_entries,
    shifted_pair,
    step_flags,
    write_episodes,
)
from rl_datasets._hub import hub_files, hub_url
from rl_datasets._ids import check_dataset_id

__all__ = ["MinariExperienceReplay"]

HUB_OWNER = "farama-minari"
_NAMES = {"observations": "observation", "infos": "info", "actions": "action"}

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

    The Minari dataset ``dataset_id`` (``"namespace/name-vN"``) is downloaded from the
    Farama hub repositories (``farama-minari/<namespace>``) with ``huggingface_hub``, and
    its ``data/main_data.hdf5`` (one ``episode_<n>`` group per episode) is read with h5py
    and converted once into TED memory-mapped tensors.  Minari stores ``T + 1``
    observations per episode, so ``("next", "observation")`` is exact at episode ends;
    ``terminations``/``truncations`` give the ``next`` done flags; ``"episode"`` holds
    the episode number.  Text entries are left out.  ``data/metadata.json`` goes to
    :attr:`metadata`.

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
            folder (``$MINARI_DATASETS_PATH`` or ``~/.minari/datasets``) instead of
            downloading it. Defaults to ``False``.

    Raises:
        ValueError: for an unknown ``dataset_id`` (close ids are suggested).
        ImportError: without huggingface_hub and h5py (``pip install 'rl-datasets[hub]'``).

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
        meta_file = folder / "metadata.json"
        extra = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
        path = folder / "main_data.hdf5"
        try:
            handle = h5py.File(path, "r")
        except OSError as err:
            path.unlink(missing_ok=not self.load_from_local_minari)
            raise ValueError(
                f"{owner}: {path} is not a readable HDF5 file ({err}). Retry the download."
            ) from err
        with handle:
            episodes = [
                _episode(handle[name], name)
                for name in sorted(handle, key=lambda n: int(n.rsplit("_", 1)[-1]))
                if name.startswith("episode_")
            ]
            data = write_episodes(dest, episodes, owner=owner)
        return data, {"source": source, "minari": extra}


def _local_minari_path() -> Path:
    return Path(os.environ.get("MINARI_DATASETS_PATH") or Path("~/.minari/datasets").expanduser())


def _episode(group: Any, name: str) -> EpisodeSource:
    steps = group["actions"].shape[0]
    number = int(name.rsplit("_", 1)[-1])

    def load() -> dict[Any, np.ndarray]:
        out: dict[Any, np.ndarray] = {}
        for key, item in h5_entries(group).items():
            head, *rest = key
            ted = (_NAMES.get(head, head), *rest)
            if head in ("observations", "infos"):
                try:
                    before, after = shifted_pair(item[()], steps)
                except ValueError as err:
                    raise ValueError(
                        f"Minari {name}/{'/'.join(key)}: {err} ({steps} steps)"
                    ) from err
                out[ted] = before
                out[("next", *ted)] = after
            elif head == "actions":
                out[ted] = np.asarray(item[()])
            elif head == "rewards":
                out[("next", "reward")] = np.asarray(item[()]).reshape(steps, 1)
        out.update(
            step_flags(group["terminations"][()], group["truncations"][()], close_last=False)
        )
        out[("episode",)] = np.full(steps, number, dtype=np.int64)
        return out

    return EpisodeSource(steps, load, name)
