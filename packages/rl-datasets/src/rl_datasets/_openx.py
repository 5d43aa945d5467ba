"""Open X-Embodiment: the episode shards of ``jxu124/OpenX-Embodiment`` on the hub.

Each ``.tar`` shard holds one ``<key>.data.pickle`` record per episode: a dict whose
``"steps"`` list holds per-step dicts (``observation``, ``action``, ``reward``,
``is_first``, ``is_last``, ``is_terminal``, ...).  Records are read with an unpickler
that only rebuilds arrays and plain containers; the repository's loading script is
never run.  Numeric entries are kept; text and encoded bytes are left out.
"""

from __future__ import annotations

import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from tensordict import TensorDictBase

from rl_datasets._base import BaseDatasetExperienceReplay
from rl_datasets._episodes import EpisodeSource, write_episodes
from rl_datasets._hub import hub_files, hub_url
from rl_datasets._safe_npy import load_pickle
from rl_replay import SliceSampler, SliceSamplerWithoutReplacement

__all__ = ["OpenXExperienceReplay"]

HUB_REPO = "jxu124/OpenX-Embodiment"
_FLAGS = {"is_first", "is_last", "is_terminal", "reward", "discount"}
_KNOWN = [
    "austin_buds_dataset_converted_externally_to_rlds",
    "austin_sailor_dataset_converted_externally_to_rlds",
    "austin_sirius_dataset_converted_externally_to_rlds",
    "berkeley_autolab_ur5",
    "berkeley_cable_routing",
    "berkeley_fanuc_manipulation",
    "bridge",
    "cmu_franka_exploration_dataset_converted_externally_to_rlds",
    "cmu_stretch",
    "columbia_cairlab_pusht_real",
    "dlr_edan_shared_control_converted_externally_to_rlds",
    "fractal20220817_data",
    "iamlab_cmu_pickup_insert_converted_externally_to_rlds",
    "jaco_play",
    "kuka",
    "language_table",
    "nyu_door_opening_surprising_effectiveness",
    "roboturk",
    "stanford_hydra_dataset_converted_externally_to_rlds",
    "taco_play",
    "toto",
    "ucsd_kitchen_dataset_converted_externally_to_rlds",
    "utaustin_mutex",
    "viola",
]


class OpenXExperienceReplay(BaseDatasetExperienceReplay):
    """Open X-Embodiment datasets experience replay.

    The shards of ``dataset_id`` in the hub dataset ``jxu124/OpenX-Embodiment`` are
    downloaded with ``huggingface_hub`` and converted once into TED memory-mapped
    tensors: the numeric ``observation`` entries with their ``next`` copies (the
    following step; zeros after the last step of an episode), ``action``,
    ``("next", "reward")``, ``("next", "done")`` (``is_last``), ``("next",
    "terminated")`` (``is_terminal``), ``("next", "truncated")`` and ``"episode"``.
    Streaming (``streaming=True``) is not offered: it needs the repository's loading
    script, code this package does not run.

    Args:
        dataset_id (str): one of :attr:`available_datasets`.
        batch_size (int, optional): the batch size of :meth:`sample`. Defaults to ``None``.

    Keyword Args:
        shuffle (bool, optional): with ``replacement=False``, visit slices in random
            order. Defaults to ``True``.
        num_slices (int, optional): sample this many episode slices. Defaults to ``None``.
        slice_len (int, optional): sample slices of this length. Defaults to ``None``.
        pad (float or bool, optional): streaming only; must be ``None``. Defaults to ``None``.
        replacement (bool, optional): sample with replacement. Defaults to ``None`` (``True``).
        streaming (bool, optional): must be ``None`` or ``False``. Defaults to ``None``.
        root (Path or str, optional): the folder of the converted datasets. Defaults to
            ``$RL_DATASETS_ROOT/openx`` or ``~/.cache/rl_stack/datasets/openx``.
        download (bool or str, optional): download and convert if needed; ``"force"``
            converts again. Defaults to ``None`` (``True``).
        sampler (Sampler, optional): overrides the slice arguments. Defaults to ``None``.
        writer (Writer, optional): Defaults to :class:`~rl_replay.ImmutableDatasetWriter`.
        collate_fn (callable, optional): Defaults to ``None``.
        pin_memory (bool, optional): Defaults to ``False``.
        prefetch (int, optional): Defaults to ``None``.
        transform (Transform, optional): applied to samples. Defaults to ``None``.
        split_trajs (bool, optional): store padded trajectories. Defaults to ``False``.
        strict_length (bool, optional): slices shorter than asked are refused.
            Defaults to ``True``.

    Raises:
        NotImplementedError: for ``streaming=True``.
        ValueError: for both ``num_slices`` and ``slice_len``, or a corrupt shard.

    Examples:
        >>> data = OpenXExperienceReplay("cmu_stretch", batch_size=64, slice_len=8)  # doctest: +SKIP
        >>> data.sample()["episode"].shape  # doctest: +SKIP
        torch.Size([64])
    """

    _source = "openx"
    available_datasets: ClassVar[list[str]] = _KNOWN

    def __init__(
        self,
        dataset_id: str,
        batch_size: int | None = None,
        *,
        shuffle: bool = True,
        num_slices: int | None = None,
        slice_len: int | None = None,
        pad: float | bool | None = None,
        replacement: bool | None = None,
        streaming: bool | None = None,
        root: str | Path | None = None,
        download: bool | str | None = None,
        sampler: Any = None,  # Any: a Sampler
        writer: Any = None,  # Any: a Writer
        collate_fn: Callable | None = None,
        pin_memory: bool = False,
        prefetch: int | None = None,
        transform: Callable | None = None,
        split_trajs: bool = False,
        strict_length: bool = True,
    ) -> None:
        owner = type(self).__name__
        if streaming or pad is not None:
            raise NotImplementedError(
                f"{owner} reads downloaded shards only: streaming needs the hub repository's "
                "loading script, which rl-datasets does not run. Pass streaming=False (the "
                "default here) and drop pad."
            )
        if num_slices is not None and slice_len is not None:
            raise ValueError(
                f"{owner} expected num_slices or slice_len, got both ({num_slices}, {slice_len})."
            )
        if sampler is None and (num_slices is not None or slice_len is not None):
            if replacement is False:
                sampler = SliceSamplerWithoutReplacement(
                    num_slices=num_slices,
                    slice_len=slice_len,
                    traj_key="episode",
                    strict_length=strict_length,
                    shuffle=shuffle,
                )
            else:
                sampler = SliceSampler(
                    num_slices=num_slices,
                    slice_len=slice_len,
                    traj_key="episode",
                    strict_length=strict_length,
                )
        self.streaming = False
        self._open(
            dataset_id,
            root=root,
            download=True if download is None else download,
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
        shards = hub_files(HUB_REPO, self.dataset_id, downloads, owner=owner, suffixes=(".tar",))
        episodes: list[EpisodeSource] = []
        for shard in shards:
            try:
                with tarfile.open(shard) as tar:
                    for member in tar.getmembers():
                        if member.isfile() and member.name.endswith("data.pickle"):
                            record = load_pickle(tar.extractfile(member).read(), member.name)
                            episodes.append(_episode(record, len(episodes), member.name, owner))
            except tarfile.TarError as err:
                shard.unlink()
                raise ValueError(
                    f"{owner}: {shard.name} is not a readable tar shard ({err}). It was removed; "
                    "retry the download."
                ) from err
        data = write_episodes(dest, episodes, owner=owner)
        return data, {"source": [hub_url(HUB_REPO, self.dataset_id)], "shards": len(shards)}


def _numeric(value: Any) -> np.ndarray | None:
    array = np.asarray(value)
    return array if array.dtype.kind in "biuf" else None


def _flatten(step: dict[str, Any], prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    out = {}
    for key, value in step.items():
        if isinstance(value, dict):
            out.update(_flatten(value, (*prefix, key)))
        else:
            out[(*prefix, key)] = value
    return out


def _episode(record: Any, number: int, name: str, owner: str) -> EpisodeSource:
    steps = record.get("steps") if isinstance(record, dict) else None
    if not isinstance(steps, list) or not steps:
        raise ValueError(f"{owner}: {name} holds no 'steps' list; it is not an Open X episode.")
    flat = [_flatten(step) for step in steps]
    length = len(flat)

    def load() -> dict[Any, np.ndarray]:
        out: dict[Any, np.ndarray] = {}
        for key in flat[0]:
            if key[0] in _FLAGS:
                continue
            column = [_numeric(step.get(key)) for step in flat]
            if any(c is None for c in column):
                continue  # text, encoded images: left out
            values = np.stack(column)
            out[key] = values
            if key[0] == "observation":
                after = np.zeros_like(values)
                after[:-1] = values[1:]
                out[("next", *key)] = after
        last = np.array([bool(step.get(("is_last",), False)) for step in flat])
        last[-1] = True
        terminal = np.array([bool(step.get(("is_terminal",), False)) for step in flat])
        reward = np.array([float(step.get(("reward",), 0.0)) for step in flat], np.float32)
        out[("next", "reward")] = reward.reshape(length, 1)
        out[("next", "done")] = last.reshape(length, 1)
        out[("next", "terminated")] = terminal.reshape(length, 1)
        out[("next", "truncated")] = (last & ~terminal).reshape(length, 1)
        for flag in ("done", "terminated", "truncated"):
            out[(flag,)] = np.zeros((length, 1), bool)
        out[("episode",)] = np.full(length, number, dtype=np.int64)
        return out

    return EpisodeSource(length, load, name)
