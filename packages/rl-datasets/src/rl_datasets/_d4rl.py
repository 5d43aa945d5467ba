"""D4RL: the benchmark's HDF5 files, read with h5py, as a TED replay buffer."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from tensordict import TensorDictBase
from tqdm.auto import tqdm

from rl_datasets._backends import EXTRA_H5, require
from rl_datasets._base import BaseDatasetExperienceReplay
from rl_datasets._d4rl_files import BASE_URL, BASE_URL_ENV, D4RL_FILES
from rl_datasets._download import download_file
from rl_datasets._ids import check_dataset_id
from rl_datasets._ted import allocate, episode_ids

__all__ = ["D4RLExperienceReplay"]

ROWS_PER_BLOCK = 1 << 18
# file entry -> TED key (the step's own value; the "next" copy is derived)
_RENAMES = {"observations": "observation", "actions": "action", "infos": "info"}
_FLAGS = ("terminals", "timeouts", "rewards", "next_observations")


class D4RLExperienceReplay(BaseDatasetExperienceReplay):
    """An Experience replay class for D4RL.

    The D4RL HDF5 file of ``dataset_id`` is downloaded from its public URL (the
    ``d4rl`` package is not needed) and converted once into TED memory-mapped tensors.
    ``observations``, ``actions``, ``rewards``, ``terminals``, ``timeouts`` and
    ``infos/*`` become ``observation``, ``action``, ``("next", "reward")``,
    ``("next", "terminated")``, ``("next", "truncated")`` and ``info`` (with its
    ``("next", "info")`` copy); ``("next", "observation")`` is the following
    observation (or the file's ``next_observations``).  The last step of the file,
    whose successor is unknown, is dropped.  ``done = terminated | truncated`` (only
    ``terminated`` with ``use_truncated_as_done=False``), and the
    ``("next", "observation")`` of ``"done"`` steps, which the file does not hold, are
    zeroed.  The root ``done``/``terminated``/``truncated`` flags are those of the
    previous step.  ``"episode"`` numbers the trajectories.  The file's ``metadata/*``
    go to :attr:`metadata`.

    The base URL of the files can be changed with the ``RL_DATASETS_D4RL_URL``
    environment variable (a mirror); ``RL_DATASETS_ROOT`` moves the default root.

    Args:
        dataset_id (str): one of :attr:`available_datasets`.
        batch_size (int): the batch size of :meth:`sample`.
        sampler (Sampler, optional): Defaults to ``RandomSampler()``.
        writer (Writer, optional): Defaults to
            :class:`~rl_replay.ImmutableDatasetWriter`.
        collate_fn (callable, optional): Defaults to ``None`` (the storage's default).
        pin_memory (bool, optional): Defaults to ``False``.
        prefetch (int, optional): batches sampled ahead. Defaults to ``None``.
        transform (Transform, optional): applied to samples. Defaults to ``None``.
        split_trajs (bool, optional): store trajectories padded to a common length,
            ``[num_trajectories, max_len]``, with ``"mask"`` and ``"traj_ids"``.
            Defaults to ``False``.
        from_env (bool, optional): read the data with the ``d4rl`` package's
            ``env.get_dataset()``. Defaults to ``False``.
        use_truncated_as_done (bool, optional): ``done = terminated | truncated``;
            otherwise ``done = terminated``. Defaults to ``True``.
        direct_download (bool, optional): download the file without ``d4rl``.
            Defaults to ``None``: with ``d4rl`` if it is installed, directly otherwise.
        terminate_on_end (bool, optional): only with ``d4rl``; ``False`` is refused with a
            direct download. Defaults to ``None``.
        download (bool or str, optional): download and convert if needed; ``"force"``
            converts again. Defaults to ``True``.
        root (Path or str, optional): the folder of the converted datasets. Defaults to
            ``$RL_DATASETS_ROOT/d4rl`` or ``~/.cache/rl_stack/datasets/d4rl``.
        **env_kwargs: only with ``d4rl``: keyword arguments of its dataset loader.

    Raises:
        ValueError: for an unknown ``dataset_id`` (close ids are suggested), or
            ``env_kwargs`` / ``terminate_on_end=False`` with a direct download.
        ImportError: without h5py (``pip install 'rl-datasets[h5]'``).

    Examples:
        >>> data = D4RLExperienceReplay("maze2d-umaze-v1", 128)  # doctest: +SKIP
        >>> data.sample()["next", "observation"].shape  # doctest: +SKIP
        torch.Size([128, 4])
    """

    _source = "d4rl"
    available_datasets: ClassVar[list[str]] = sorted(D4RL_FILES)

    def __init__(
        self,
        dataset_id: str,
        batch_size: int,
        sampler: Any = None,  # Any: a Sampler
        writer: Any = None,  # Any: a Writer
        collate_fn: Callable | None = None,
        pin_memory: bool = False,
        prefetch: int | None = None,
        transform: Callable | None = None,
        split_trajs: bool = False,
        from_env: bool = False,
        use_truncated_as_done: bool = True,
        direct_download: bool | None = None,
        terminate_on_end: bool | None = None,
        download: bool | str = True,
        root: str | Path | None = None,
        **env_kwargs: Any,  # Any: forwarded to d4rl
    ) -> None:
        owner = type(self).__name__
        check_dataset_id(owner, dataset_id, D4RL_FILES)
        if direct_download is None:
            direct_download = not from_env and importlib.util.find_spec("d4rl") is None
        if direct_download and (env_kwargs or terminate_on_end is False or from_env):
            raise ValueError(
                f"{owner} downloads the file directly (direct_download=True), which takes no "
                f"env_kwargs ({sorted(env_kwargs)}), terminate_on_end=False or from_env=True. "
                "Drop them, or install d4rl and pass direct_download=False."
            )
        self.use_truncated_as_done = use_truncated_as_done
        self.direct_download = direct_download
        self.from_env = from_env
        self._env_kwargs = env_kwargs
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

    @staticmethod
    def _url(dataset_id: str) -> str:
        base = os.environ.get(BASE_URL_ENV) or BASE_URL
        return base.rstrip("/") + "/" + D4RL_FILES[dataset_id]

    def _convert(self, downloads: Path, dest: Path) -> tuple[TensorDictBase, dict[str, Any]]:
        owner = type(self).__name__
        if not self.direct_download:
            arrays = _from_d4rl(self.dataset_id, self._env_kwargs, owner)
            data = write_d4rl_ted(
                arrays, dest, self.use_truncated_as_done, owner=owner, name="d4rl"
            )
            return data, {"source": ["d4rl"], "metadata": _metadata_of(arrays)}
        h5py = require("h5py", extra=EXTRA_H5, owner=owner)
        url = self._url(self.dataset_id)
        file = download_file(url, downloads / Path(D4RL_FILES[self.dataset_id]).name, owner=owner)
        try:
            handle = h5py.File(file, "r")
        except OSError as err:
            file.unlink()
            raise ValueError(
                f"{owner}: {file.name} downloaded from {url} is not a readable HDF5 file "
                f"({err}). It was removed; retry, or check the source URL."
            ) from err
        with handle:
            arrays = _flatten_h5(handle)
            data = write_d4rl_ted(
                arrays, dest, self.use_truncated_as_done, owner=owner, name=file.name
            )
            meta = _metadata_of(arrays)
        return data, {"source": [url], "metadata": meta}


def _flatten_h5(group: Any, prefix: str = "") -> dict[str, Any]:
    out = {}
    for name, item in group.items():
        key = f"{prefix}{name}"
        if hasattr(item, "keys"):
            out.update(_flatten_h5(item, key + "/"))
        else:
            out[key] = item
    return out


def _from_d4rl(dataset_id: str, env_kwargs: dict[str, Any], owner: str) -> dict[str, Any]:
    """The arrays of ``env.get_dataset()`` (the same entries as the HDF5 file)."""
    try:
        import d4rl  # noqa: F401  (registers the D4RL environments with gym)
        import gym
    except ImportError as err:
        raise ImportError(
            f"{owner}(direct_download=False) needs the d4rl and gym packages ({err}). Install "
            "them from the D4RL repository, or pass direct_download=True."
        ) from err
    return dict(gym.make(dataset_id).get_dataset(**env_kwargs))


def _metadata_of(arrays: Mapping[str, Any]) -> dict[str, Any]:
    meta = {}
    for key, value in arrays.items():
        if key.startswith("metadata/"):
            value = np.asarray(value[()])
            if value.dtype.kind in "SO":
                value = value.astype(str)
            meta[key[len("metadata/") :]] = value.tolist()
    return meta


def write_d4rl_ted(
    arrays: Mapping[str, Any],
    dest: Path,
    use_truncated_as_done: bool,
    *,
    owner: str,
    name: str,
    progress: bool = True,
) -> TensorDictBase:
    """Convert the D4RL entries ``arrays`` (``"key"`` or ``"group/key"`` -> array or h5py
    dataset) into a TED tensordict memory-mapped at ``dest``.

    Raises:
        KeyError: if a required entry is missing (the message names the file).
        ValueError: if entries disagree on the number of steps.
    """
    for key in ("observations", "actions", "rewards", "terminals"):
        if key not in arrays:
            raise KeyError(
                f"{owner}: {name} has no {key!r} entry; found {sorted(arrays)}. It is not a D4RL "
                "dataset file: retry the download with download='force'."
            )
    steps = arrays["observations"].shape[0]
    step_keys = [
        k
        for k in arrays
        if not k.startswith("metadata/") and k not in _FLAGS and arrays[k].dtype.kind in "biuf"
    ]
    for key in [*step_keys, *(k for k in _FLAGS if k in arrays)]:
        if arrays[key].shape[:1] != (steps,):
            raise ValueError(
                f"{owner}: {name} entry {key!r} has {arrays[key].shape[:1]} steps, expected "
                f"{steps} (as 'observations'). The file is corrupt: download it again."
            )
    rows = steps - 1
    specs: dict[Any, tuple[tuple[int, ...], torch.dtype]] = {}
    for key in step_keys:
        ted = _ted_key(key)
        spec = (tuple(arrays[key].shape[1:]), _torch_dtype(arrays[key].dtype))
        specs[ted] = spec
        if ted[0] in ("observation", "info"):
            specs[("next", *ted)] = spec
    specs[("next", "reward")] = ((1,), _torch_dtype(arrays["rewards"].dtype))
    for flag in ("done", "terminated", "truncated"):
        specs[flag] = ((1,), torch.bool)
        specs[("next", flag)] = ((1,), torch.bool)
    specs["episode"] = ((), torch.int64)
    out = allocate(dest, specs, rows)
    # flags first: they decide which next observations are zeroed
    terminated = torch.from_numpy(np.asarray(arrays["terminals"][:rows]).astype(bool))
    truncated = (
        torch.from_numpy(np.asarray(arrays["timeouts"][:rows]).astype(bool))
        if "timeouts" in arrays
        else torch.zeros(rows, dtype=torch.bool)
    )
    done = terminated | truncated if use_truncated_as_done else terminated.clone()
    for flag, value in (("terminated", terminated), ("truncated", truncated), ("done", done)):
        out.get(("next", flag)).copy_(value.unsqueeze(-1))
        root = out.get(flag)
        root[0] = False
        root[1:].copy_(value[:-1].unsqueeze(-1))
    out.get("episode").copy_(episode_ids(done))
    with tqdm(
        total=rows, unit="step", desc=f"converting {name}", disable=not progress, leave=False
    ) as bar:
        for start in range(0, rows, ROWS_PER_BLOCK):
            stop = min(start + ROWS_PER_BLOCK, rows)
            _write_block(arrays, out, step_keys, start, stop, done[start:stop])
            bar.update(stop - start)
    return out


def _write_block(
    arrays: Mapping[str, Any],
    out: TensorDictBase,
    step_keys: list[str],
    start: int,
    stop: int,
    done: torch.Tensor,
) -> None:
    has_next = "next_observations" in arrays
    for key in step_keys:
        ted = _ted_key(key)
        dest = out.get(ted).numpy()
        _read_into(arrays[key], dest, start, stop)
        if ted[0] not in ("observation", "info"):
            continue
        nxt = out.get(("next", *ted)).numpy()
        if key == "observations" and has_next:
            _read_into(arrays["next_observations"], nxt, start, stop)
        else:  # the following step's value: this block shifted, and the next block's first row
            nxt[start : stop - 1] = dest[start + 1 : stop]
            nxt[stop - 1] = arrays[key][stop]
        if key == "observations" and bool(done.any()):
            nxt[start:stop][done.numpy()] = 0  # unknown successors of done steps
    rewards = np.asarray(arrays["rewards"][start:stop])
    out.get(("next", "reward")).numpy()[start:stop, 0] = rewards


def _read_into(source: Any, dest: np.ndarray, start: int, stop: int) -> None:
    """Rows ``start:stop`` of an h5py dataset (read straight into ``dest``) or an array."""
    if hasattr(source, "read_direct") and dest.flags.c_contiguous:
        source.read_direct(dest, np.s_[start:stop], np.s_[start:stop])
    else:
        dest[start:stop] = np.asarray(source[start:stop])


def _ted_key(key: str) -> tuple[str, ...]:
    head, *rest = key.split("/")
    return (_RENAMES.get(head, head), *rest)


def _torch_dtype(dtype: Any) -> torch.dtype:
    return torch.from_numpy(np.zeros((), dtype=np.dtype(dtype))).dtype
