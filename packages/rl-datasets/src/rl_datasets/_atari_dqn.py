"""Atari DQN: the DQN Replay Dataset's gzipped ``.npy`` checkpoints, one frame stored once.

Each run of a game (``"Pong/5"``) has up to 51 checkpoints; checkpoint ``N`` is six
files ``$store$_<name>_ckpt.N.gz`` (``observation``, ``action``, ``reward``,
``terminal``) plus ``add_count_ckpt.N.gz`` and ``invalid_range_ckpt.N.gz``.  The frames
are streamed from the gzip files into one memory-mapped tensor; the TED ``next`` entries
are formed at sampling time by :class:`_FrameStorage` (the following frame, zeros after
a terminal step or the last step of a checkpoint, whose successor is not recorded).
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from rl_datasets._base import BaseDatasetExperienceReplay
from rl_datasets._download import download_file
from rl_datasets._ids import check_dataset_id
from rl_datasets._paths import DATA_DIR
from rl_datasets._safe_npy import load_npy
from rl_datasets._ted import allocate, full_storage
from rl_replay import (
    SamplerWithoutReplacement,
    SliceSampler,
    SliceSamplerWithoutReplacement,
    Storage,
)

__all__ = ["AtariDQNExperienceReplay"]

BASE_URL = "https://storage.googleapis.com/atari-replay-datasets/dqn/"
BASE_URL_ENV = "RL_DATASETS_ATARI_URL"
MAX_CHECKPOINTS = 51
FIELDS = ("observation", "action", "reward", "terminal")
ROWS_PER_BLOCK = 1 << 14
_GAMES = (
    "AirRaid Alien Amidar Assault Asterix Asteroids Atlantis BankHeist BattleZone BeamRider "
    "Berzerk Bowling Boxing Breakout Carnival Centipede ChopperCommand CrazyClimber "
    "DemonAttack DoubleDunk ElevatorAction Enduro FishingDerby Freeway Frostbite Gopher "
    "Gravitar Hero IceHockey Jamesbond JourneyEscape Kangaroo Krull KungFuMaster "
    "MontezumaRevenge MsPacman NameThisGame Phoenix Pitfall Pong Pooyan PrivateEye Qbert "
    "Riverraid RoadRunner Robotank Seaquest Skiing Solaris SpaceInvaders"
).split()


class AtariDQNExperienceReplay(BaseDatasetExperienceReplay):
    """Atari DQN Experience replay class.

    The DQN Replay Dataset holds 5 runs of DQN on 50 Atari 2600 games; ``dataset_id`` is
    ``"<Game>/<run>"`` (``"Pong/5"``).  The checkpoints of the run are downloaded (base
    URL from ``RL_DATASETS_ATARI_URL``, a mirror) and their frames streamed once into
    memory-mapped tensors.  Each frame is stored once: ``("next", "observation")`` is
    formed when sampling, from the following frame, and is zeros when ``("next",
    "done")`` is set (the dataset does not hold the frame after a terminal step) or at the
    last step of a checkpoint (``("next", "truncated")``).  ``"episode"`` numbers the
    episodes, for :class:`~rl_replay.SliceSampler` (see ``num_slices``/``slice_len``).

    Args:
        dataset_id (str): one of :attr:`available_datasets`.
        batch_size (int, optional): the batch size of :meth:`sample`. Defaults to ``None``.

    Keyword Args:
        root (Path or str, optional): the folder of the converted datasets. Defaults to
            ``$RL_DATASETS_ROOT/atari`` or ``~/.cache/rl_stack/datasets/atari``.
        download (bool or str, optional): download and convert if needed; ``"force"``
            converts again. Defaults to ``True``.
        sampler (Sampler, optional): overrides the slice arguments. Defaults to ``None``.
        writer (Writer, optional): Defaults to :class:`~rl_replay.ImmutableDatasetWriter`.
        transform (Transform, optional): applied to samples. Defaults to ``None``.
        num_procs (int, optional): accepted for API compatibility. Defaults to ``0``.
        num_slices (int, optional): sample this many episode slices. Defaults to ``None``.
        slice_len (int, optional): sample slices of this length. Defaults to ``None``.
        strict_len (bool, optional): slices shorter than asked are refused. Defaults to ``True``.
        replacement (bool, optional): sample with replacement. Defaults to ``True``.
        mp_start_method (str, optional): accepted for API compatibility. Defaults to ``"fork"``.
        **kwargs: other :class:`~rl_replay.TensorDictReplayBuffer` keywords.

    Raises:
        ValueError: for an unknown ``dataset_id`` (close ids are suggested), or a corrupt file.

    Examples:
        >>> dataset = AtariDQNExperienceReplay("Pong/5", batch_size=128)  # doctest: +SKIP
        >>> dataset.sample()["next", "observation"].shape  # doctest: +SKIP
        torch.Size([128, 84, 84])
    """

    _source = "atari"
    available_datasets: ClassVar[list[str]] = [f"{g}/{run}" for g in _GAMES for run in range(1, 6)]

    def __init__(
        self,
        dataset_id: str,
        batch_size: int | None = None,
        *,
        root: str | Path | None = None,
        download: bool | str = True,
        sampler: Any = None,  # Any: a Sampler
        writer: Any = None,  # Any: a Writer
        transform: Any = None,  # Any: a callable on tensordicts
        num_procs: int = 0,
        num_slices: int | None = None,
        slice_len: int | None = None,
        strict_len: bool = True,
        replacement: bool = True,
        mp_start_method: str = "fork",
        **kwargs: Any,  # Any: other TensorDictReplayBuffer keywords
    ) -> None:
        check_dataset_id(type(self).__name__, dataset_id, self.available_datasets)
        if sampler is None and (num_slices is not None or slice_len is not None):
            slice_cls = SliceSampler if replacement else SliceSamplerWithoutReplacement
            sampler = slice_cls(
                num_slices=num_slices,
                slice_len=slice_len,
                traj_key="episode",
                strict_length=strict_len,
            )
        elif sampler is None and not replacement:
            sampler = SamplerWithoutReplacement()
        self._open(
            dataset_id,
            root=root,
            download=download,
            writer=writer,
            batch_size=batch_size,
            sampler=sampler,
            transform=transform,
            **kwargs,
        )

    @property
    def episodes(self) -> torch.Tensor:
        """The episode of each stored step."""
        return self._storage.data.get("episode")

    def _make_storage(self, data_dir: Path) -> Storage:
        data = TensorDict.load_memmap(data_dir)
        if ("next", "observation") in data.keys(True):  # preprocessed: next is stored
            return full_storage(data)
        return _FrameStorage(data)

    def _reader(self) -> _FrameReader:
        return _FrameReader(self.data_path / DATA_DIR)

    def _convert(self, downloads: Path, dest: Path) -> tuple[TensorDictBase, dict[str, Any]]:
        owner = type(self).__name__
        base = (os.environ.get(BASE_URL_ENV) or BASE_URL).rstrip("/")
        run_url = f"{base}/{self.dataset_id}/replay_logs"
        checkpoints: list[dict[str, Path]] = []
        for n in range(MAX_CHECKPOINTS):
            files = {}
            for name in (*FIELDS, "add_count", "invalid_range"):
                stem = f"$store$_{name}_ckpt" if name in FIELDS else f"{name}_ckpt"
                url = f"{run_url}/{stem.replace('$', '%24')}.{n}.gz"
                try:
                    files[name] = download_file(url, downloads / f"{stem}.{n}.gz", owner=owner)
                except FileNotFoundError:
                    if n == 0 or name != "observation":
                        raise
                    break
            if len(files) < len(FIELDS) + 2:
                break
            checkpoints.append(files)
        return _write_checkpoints(checkpoints, dest, owner), {
            "source": [run_url],
            "checkpoints": [
                {k: _small(files[k], owner).tolist() for k in ("add_count", "invalid_range")}
                for files in checkpoints
            ],
        }


def _small(path: Path, owner: str) -> np.ndarray:
    try:
        with gzip.open(path, "rb") as stream:
            return np.asarray(load_npy(stream, path.name))
    except (OSError, EOFError) as err:
        path.unlink()
        raise ValueError(f"{owner}: {path.name} is not a gzip file ({err}); retry.") from err


def _header(stream: Any, name: str) -> tuple[tuple[int, ...], np.dtype]:
    try:
        version = np.lib.format.read_magic(stream)
        read = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        shape, fortran, dtype = read(stream)
    except (ValueError, OSError, EOFError) as err:
        raise ValueError(f"{name} is not a gzipped .npy file ({err}). Retry the download.") from err
    if fortran or dtype.hasobject:
        raise ValueError(f"{name} holds a {'Fortran' if fortran else 'object'} array, not frames.")
    return shape, dtype


def _write_checkpoints(
    checkpoints: list[dict[str, Path]], dest: Path, owner: str
) -> TensorDictBase:
    shapes = []
    for files in checkpoints:
        with gzip.open(files["observation"], "rb") as stream:
            shapes.append(_header(stream, files["observation"].name))
    total = sum(shape[0] for shape, _ in shapes)
    frame_shape, frame_dtype = shapes[0][0][1:], shapes[0][1]
    specs = {
        "observation": (tuple(frame_shape), torch.from_numpy(np.zeros((), frame_dtype)).dtype),
        "action": ((), torch.int32),
        ("next", "reward"): ((), torch.float32),
        ("next", "terminated"): ((1,), torch.bool),
        ("next", "truncated"): ((1,), torch.bool),
        "episode": ((), torch.int64),
    }
    out = allocate(dest, specs, total)
    offset = 0
    for files, (shape, _) in zip(checkpoints, shapes, strict=True):
        rows = shape[0]
        for name, key in (
            ("observation", "observation"),
            ("action", "action"),
            ("reward", ("next", "reward")),
            ("terminal", ("next", "terminated")),
        ):
            target = out.get(key).numpy()[offset : offset + rows].reshape(rows, -1)
            _stream_rows(files[name], target, owner)
        out.get(("next", "truncated"))[offset + rows - 1] = True
        offset += rows
    done = out.get(("next", "terminated")) | out.get(("next", "truncated"))
    ends = done.squeeze(-1).to(torch.int64)
    out.get("episode")[1:] = ends[:-1].cumsum(0)
    out.get("episode")[0] = 0
    return out


def _stream_rows(path: Path, target: np.ndarray, owner: str) -> None:
    """Copy the rows of a gzipped ``.npy`` into ``target`` block by block (no full load)."""
    try:
        with gzip.open(path, "rb") as stream:
            shape, dtype = _header(stream, path.name)
            if shape[0] != target.shape[0]:
                raise ValueError(
                    f"{owner}: {path.name} has {shape[0]} rows, expected {target.shape[0]} (as "
                    "the observations). The checkpoint is corrupt: download it again."
                )
            width = int(np.prod(shape[1:], dtype=np.int64))
            for start in range(0, shape[0], ROWS_PER_BLOCK):
                stop = min(start + ROWS_PER_BLOCK, shape[0])
                count = (stop - start) * width
                data = stream.read(count * dtype.itemsize)
                if len(data) != count * dtype.itemsize:
                    raise ValueError(f"{owner}: {path.name} is truncated. Download it again.")
                target[start:stop] = np.frombuffer(data, dtype=dtype).reshape(stop - start, -1)
    except (OSError, EOFError) as err:
        path.unlink(missing_ok=True)
        raise ValueError(f"{owner}: {path.name} is not a valid gzip file ({err}); retry.") from err


class _FrameReader:
    """Rows of a stored Atari run with their ``next`` entries (picklable, for preprocess)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._storage: _FrameStorage | None = None

    def __call__(self, start: int, stop: int) -> TensorDictBase:
        if self._storage is None:
            self._storage = _FrameStorage(TensorDict.load_memmap(self.path))
        return self._storage.get(slice(start, stop))

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "_storage": None}


class _FrameStorage(Storage):
    """A read-only storage that forms ``("next", "observation")`` from the following frame."""

    def __init__(self, data: TensorDictBase) -> None:
        super().__init__(data.batch_size[0])
        self.data = data
        self.device = torch.device("cpu")
        self._frames = data.get("observation").as_subclass(torch.Tensor)
        self._ends = (data.get(("next", "terminated")) | data.get(("next", "truncated"))).squeeze(
            -1
        )

    def __len__(self) -> int:
        return self.max_size

    def get(self, index: Any) -> TensorDictBase:  # Any: int, slice, list or LongTensor
        if isinstance(index, int):
            return self.get(torch.tensor([index]))[0]
        if isinstance(index, slice):
            index = torch.arange(self.max_size)[index]
        index = torch.as_tensor(index, dtype=torch.long).reshape(-1)
        out = TensorDict(
            {key: value[index] for key, value in self.data.items(True, True)},
            batch_size=index.shape,
        )
        following = (index + 1).clamp_max(self.max_size - 1)
        frames = self._frames[following]
        frames[self._ends[index]] = 0
        out.set(("next", "observation"), frames)
        flags = out.get(("next", "terminated")) | out.get(("next", "truncated"))
        out.set(("next", "done"), flags)
        zeros = torch.zeros_like(flags)
        for flag in ("done", "terminated", "truncated"):
            out.set(flag, zeros)
        return out

    def set(self, cursor: Any, data: Any, *, set_cursor: bool = True) -> None:  # Any: rejected
        raise RuntimeError(
            "AtariDQNExperienceReplay's storage is read-only: expected no writes, got one."
        )

    def state_dict(self) -> dict[str, Any]:
        return {"len": self.max_size}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        return None

    def _empty(self) -> None:
        return None

    def _get_entry(self, key: Any, index: Any = None) -> torch.Tensor:  # Any: a key / an index
        value = self.data.get(key, None)
        if value is None:  # an entry formed on read ("next" frames, done flags)
            rows = torch.arange(self.max_size) if index is None else index
            return self.get(rows).get(key)
        return value if index is None else value[index]
