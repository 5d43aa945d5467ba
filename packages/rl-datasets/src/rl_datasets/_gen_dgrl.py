"""Gen-DGRL: the Procgen datasets' ``.tar.xz`` archives of per-episode ``.npy`` files."""

from __future__ import annotations

import os
import tarfile
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from tensordict import TensorDictBase

from rl_datasets._base import BaseDatasetExperienceReplay
from rl_datasets._download import download_file
from rl_datasets._episodes import EpisodeSource, step_flags, write_episodes
from rl_datasets._ids import check_dataset_id
from rl_datasets._safe_npy import load_npy

__all__ = ["GenDGRLExperienceReplay"]

BASE_URL = "https://dl.fbaipublicfiles.com/DGRL/Procgen/Datasets/Compressed/"
BASE_URL_ENV = "RL_DATASETS_GEN_DGRL_URL"
_GAMES = (
    "bigfish bossfight caveflyer chaser climber coinrun dodgeball fruitbot heist jumper "
    "leaper maze miner ninja plunder starpilot"
).split()
# category -> folder under the base URL
_CATEGORIES = {
    "1M_E": "1M/level_200/expert",
    "1M_S": "1M/level_200/suboptimal",
    "10M": "10M/level_200/expert",
    "25M": "25M/level_200/expert",
    "level_1_S": "100k/level_1/suboptimal",
    "level_40_S": "100k/level_40/suboptimal",
    "level_1_E": "100k/level_1/expert",
    "level_40_E": "100k/level_40/expert",
}


class GenDGRLExperienceReplay(BaseDatasetExperienceReplay):
    """Gen-DGRL Experience Replay dataset.

    The Procgen datasets of "The Generalization Gap in Offline Reinforcement Learning":
    ``dataset_id`` is ``"<game>-<category>"`` (``"bigfish-1M_E"``).  The category's
    ``<game>.tar.xz`` archive (base URL from ``RL_DATASETS_GEN_DGRL_URL``, a mirror) holds
    one ``.npy`` (or ``.npz``) file per episode with ``observations`` (``T + 1``
    frames), ``actions``, ``rewards`` and ``dones``.  They are converted once into TED
    memory-mapped tensors (``("next", "observation")`` exact at episode ends).  The
    episode files are pickled dicts: they are read with an unpickler that only rebuilds
    arrays, so a file that asks for code to run is rejected.

    Args:
        dataset_id (str): one of :attr:`available_datasets`.
        batch_size (int, optional): the batch size of :meth:`sample`. Defaults to ``None``.

    Keyword Args:
        root (Path or str, optional): the folder of the converted datasets. Defaults to
            ``$RL_DATASETS_ROOT/gen_dgrl`` or ``~/.cache/rl_stack/datasets/gen_dgrl``.
        download (bool or str, optional): download and convert if needed; ``"force"``
            converts again. Defaults to ``True``.
        **kwargs: other :class:`~rl_replay.TensorDictReplayBuffer` keywords.

    Raises:
        ValueError: for an unknown ``dataset_id`` (close ids are suggested), or an archive
            member that is not an episode.

    Examples:
        >>> data = GenDGRLExperienceReplay("bigfish-1M_E", batch_size=32)  # doctest: +SKIP
        >>> data.sample()["observation"].shape  # doctest: +SKIP
        torch.Size([32, 64, 64, 3])
    """

    _source = "gen_dgrl"
    available_datasets: ClassVar[list[str]] = [f"{g}-{c}" for g in _GAMES for c in _CATEGORIES]

    def __init__(
        self,
        dataset_id: str,
        batch_size: int | None = None,
        *,
        root: str | Path | None = None,
        download: bool | str = True,
        **kwargs: Any,  # Any: other TensorDictReplayBuffer keywords
    ) -> None:
        check_dataset_id(type(self).__name__, dataset_id, self.available_datasets)
        self._open(dataset_id, root=root, download=download, batch_size=batch_size, **kwargs)

    def _convert(self, downloads: Path, dest: Path) -> tuple[TensorDictBase, dict[str, Any]]:
        owner = type(self).__name__
        game, category = self.dataset_id.split("-", 1)
        base = (os.environ.get(BASE_URL_ENV) or BASE_URL).rstrip("/")
        url = f"{base}/{_CATEGORIES[category]}/{game}.tar.xz"
        archive = download_file(url, downloads / f"{game}.tar.xz", owner=owner)
        try:
            with tarfile.open(archive, "r:*") as tar:
                # archive order: both passes read the compressed stream forward only
                members = [
                    m for m in tar.getmembers() if m.isfile() and m.name.endswith((".npy", ".npz"))
                ]
                episodes = [_episode(tar, m, owner) for m in members]
                data = write_episodes(dest, episodes, owner=owner)
        except (tarfile.TarError, EOFError, OSError) as err:
            archive.unlink(missing_ok=True)
            raise ValueError(
                f"{owner}: {archive.name} from {url} is not a readable archive ({err}). It was "
                "removed; retry the download."
            ) from err
        return data, {"source": [url]}


def _read_member(tar: tarfile.TarFile, member: tarfile.TarInfo, owner: str) -> dict[str, Any]:
    stream = tar.extractfile(member)
    if member.name.endswith(".npz"):
        with np.load(stream, allow_pickle=False) as npz:
            return {name: npz[name] for name in npz.files}
    try:
        value = load_npy(stream, member.name)
    except ValueError as err:
        raise ValueError(f"{owner}: {err}") from err
    if not isinstance(value, dict) or "actions" not in value:
        raise ValueError(
            f"{owner}: {member.name} does not hold an episode dict with 'actions', got "
            f"{type(value).__name__}. The archive is not a Gen-DGRL dataset."
        )
    return value


def _episode(tar: tarfile.TarFile, member: tarfile.TarInfo, owner: str) -> EpisodeSource:
    steps = int(np.asarray(_read_member(tar, member, owner)["actions"]).shape[0])

    def load() -> dict[Any, np.ndarray]:  # read again: episodes are not all kept in memory
        episode = _read_member(tar, member, owner)
        observations = np.asarray(episode["observations"])
        if observations.shape[0] != steps + 1:
            raise ValueError(
                f"{owner}: {member.name} has {observations.shape[0]} observations for {steps} "
                f"actions, expected {steps + 1}. The episode file is corrupt."
            )
        out: dict[Any, np.ndarray] = {
            ("observation",): observations[:-1].astype(np.uint8),
            ("next", "observation"): observations[1:].astype(np.uint8),
            ("action",): np.asarray(episode["actions"]).reshape(steps, -1).squeeze(-1),
            ("next", "reward"): np.asarray(episode["rewards"], dtype=np.float32).reshape(steps, 1),
        }
        out.update(step_flags(np.asarray(episode["dones"]).reshape(steps), None, close_last=True))
        return out

    return EpisodeSource(steps, load, member.name)
