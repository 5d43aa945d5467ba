"""Roboset: the RoboHive ``.h5`` files of ``jdvakil/RoboSet_Sim`` on the Hugging Face hub."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from tensordict import TensorDictBase

from rl_datasets._backends import EXTRA_HUB, require
from rl_datasets._base import BaseDatasetExperienceReplay
from rl_datasets._episodes import EpisodeSource, h5_entries, step_flags, write_episodes
from rl_datasets._hub import hub_files, hub_url
from rl_datasets._ids import check_dataset_id

__all__ = ["RobosetExperienceReplay"]

HUB_REPO = "jdvakil/RoboSet_Sim"
_NAMES = {"observations": "observation", "env_infos": "info", "actions": "action"}
_KNOWN = [
    *(
        f"DAPG({kind})/{task}_v2d-v1"
        for kind in ("expert", "human")
        for task in ("door", "relocate", "hammer", "pen")
    ),
    *(
        f"FK1-v4(expert)/FK1_{task}_v2d-v4"
        for task in (
            "MicroOpenRandom",
            "Knob2OffRandom",
            "LdoorOpenRandom",
            "SdoorOpenRandom",
            "Knob1OnRandom",
        )
    ),
    "FK1-v4(human)/human_demos_by_playdata",
    "FK1-v4(human)/human_demos_by_task/human_demo_singleTask_Fixed-v4",
    *(
        f"FK1-v4(human)/human_demos_by_task/FK1_{task}_v2d-v4"
        for task in (
            "SdoorOpenRandom",
            "LdoorOpenRandom",
            "Knob2OffRandom",
            "Knob1OnRandom",
            "MicroOpenRandom",
        )
    ),
]


class RobosetExperienceReplay(BaseDatasetExperienceReplay):
    """Roboset experience replay dataset.

    The ``.h5`` files of ``dataset_id`` in the hub dataset ``jdvakil/RoboSet_Sim`` are
    downloaded with ``huggingface_hub`` and read with h5py: each ``Trial<n>`` group is an
    episode with ``observations``, ``actions``, ``rewards``, ``done`` and
    ``env_infos/*``.  They are converted once into TED memory-mapped tensors:
    ``observation``, ``action``, ``info`` with their ``next`` copies (the following
    step's values; zeros after the last step of a trial, whose successor is not
    recorded), ``("next", "reward")``, ``("next", "terminated")`` from ``done``, and the
    last step of a trial that ``done`` does not end is ``("next", "truncated")``.
    ``"episode"`` is the trial number and ``"seed"`` the index of its file.

    Args:
        dataset_id (str): one of :attr:`available_datasets`.
        batch_size (int): the batch size of :meth:`sample`.

    Keyword Args:
        root (Path or str, optional): the folder of the converted datasets. Defaults to
            ``$RL_DATASETS_ROOT/roboset`` or ``~/.cache/rl_stack/datasets/roboset``.
        download (bool or str, optional): download and convert if needed; ``"force"``
            converts again. Defaults to ``True``.
        sampler (Sampler, optional): Defaults to ``RandomSampler()``.
        writer (Writer, optional): Defaults to :class:`~rl_replay.ImmutableDatasetWriter`.
        collate_fn (callable, optional): Defaults to ``None``.
        pin_memory (bool, optional): Defaults to ``False``.
        prefetch (int, optional): Defaults to ``None``.
        transform (Transform, optional): applied to samples. Defaults to ``None``.
        split_trajs (bool, optional): store padded trajectories. Defaults to ``False``.
        **env_kwargs: accepted for API compatibility, unused.

    Raises:
        ValueError: for an unknown ``dataset_id`` (close ids are suggested).
        ImportError: without huggingface_hub and h5py (``pip install 'rl-datasets[hub]'``).

    Examples:
        >>> d = RobosetExperienceReplay("FK1-v4(expert)/FK1_MicroOpenRandom_v2d-v4", batch_size=32)  # doctest: +SKIP
        >>> d.sample()["observation"].shape  # doctest: +SKIP
        torch.Size([32, 75])
    """

    _source = "roboset"
    available_datasets: ClassVar[list[str]] = _KNOWN

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
        **env_kwargs: Any,  # Any: accepted for API compatibility
    ) -> None:
        check_dataset_id(type(self).__name__, dataset_id, self.available_datasets)
        self._open(
            dataset_id,
            root=root,
            download=download,
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
        files = hub_files(HUB_REPO, self.dataset_id, downloads, owner=owner, suffixes=(".h5",))
        handles = []
        try:
            for file in files:
                try:
                    handles.append(h5py.File(file, "r"))
                except OSError as err:
                    file.unlink()
                    raise ValueError(
                        f"{owner}: {file.name} is not a readable HDF5 file ({err}). It was "
                        "removed; retry the download."
                    ) from err
            episodes = [
                _trial(handle[name], name, seed)
                for seed, handle in enumerate(handles)
                for name in sorted(handle, key=_trial_number)
                if name.startswith("Trial")
            ]
            data = write_episodes(dest, episodes, owner=owner)
        finally:
            for handle in handles:
                handle.close()
        return data, {
            "source": [hub_url(HUB_REPO, self.dataset_id)],
            "files": [f.name for f in files],
        }


def _trial_number(name: str) -> int:
    digits = name[len("Trial") :]
    return int(digits) if digits.isdigit() else -1


def _trial(group: Any, name: str, seed: int) -> EpisodeSource:
    steps = group["actions"].shape[0]

    def load() -> dict[Any, np.ndarray]:
        out: dict[Any, np.ndarray] = {}
        for key, item in h5_entries(group).items():
            head, *rest = key
            ted = (_NAMES.get(head, head), *rest)
            values = np.asarray(item[()])
            if head in ("observations", "env_infos"):
                after = np.zeros_like(values)
                after[:-1] = values[1:]  # the successor of the last step is not recorded
                out[ted] = values
                out[("next", *ted)] = after
            elif head == "rewards":
                out[("next", "reward")] = values.reshape(steps, 1)
            elif head != "done":
                out[ted] = values
        done = group["done"][()] if "done" in group else np.zeros(steps, bool)
        out.update(step_flags(done, None, close_last=True))
        out[("episode",)] = np.full(steps, _trial_number(name), dtype=np.int64)
        out[("seed",)] = np.full(steps, seed, dtype=np.int64)
        return out

    return EpisodeSource(steps, load, f"{name} (file {seed})")
