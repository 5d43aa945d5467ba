"""The two readers of a Minari dataset, and the one conversion of its episodes into TED.

A Minari dataset is a folder ``<dataset_id>/data/`` holding ``metadata.json`` and, for the
HDF5 format, ``main_data.hdf5`` with one ``episode_<n>`` group per episode
(``observations``, ``actions``, ``rewards``, ``terminations``, ``truncations``,
``infos``; dict spaces as subgroups, tuple spaces as ``_index_<i>`` subgroups).

:func:`minari_episodes` reads it through the ``minari`` package (its storage reader and
episode iterator); :func:`h5py_episodes` reads the HDF5 file directly with h5py. Both
flatten each episode into ``{("observations", "observation"): array, ...}`` (the HDF5
paths) and hand it to :func:`ted_entries`, so both give the same TED rows.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from rl_datasets._episodes import EpisodeSource, h5_entries, shifted_pair, step_flags

__all__ = [
    "flatten_episode",
    "h5py_episodes",
    "import_minari",
    "minari_datasets_path",
    "minari_episodes",
    "ted_entries",
]

_NAMES = {"observations": "observation", "infos": "info", "actions": "action"}
_FIELDS = ("observations", "actions", "rewards", "terminations", "truncations", "infos")


def import_minari() -> ModuleType | None:
    """The ``minari`` package, or ``None`` where it is not installed (the h5py reader is used)."""
    try:
        import minari
    except ImportError:
        return None
    return minari


@contextlib.contextmanager
def minari_datasets_path(path: Path) -> Iterator[None]:
    """Point Minari's local dataset folder (``MINARI_DATASETS_PATH``) at ``path`` for a while.

    Minari's download and loader take the folder from that variable only; it is restored on exit.
    """
    previous = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = str(path)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("MINARI_DATASETS_PATH", None)
        else:
            os.environ["MINARI_DATASETS_PATH"] = previous


def ted_entries(raw: dict[tuple[str, ...], np.ndarray], steps: int, number: int, name: str) -> dict:
    """The TED entries of one Minari episode from its flattened arrays.

    ``raw`` maps the HDF5 paths (``("observations", "observation")``, ``("rewards",)``, ...)
    to arrays. Observations and infos hold ``steps + 1`` rows (the reset one first), so
    ``("next", ...)`` is exact at the episode's end; ``"episode"`` is ``number``.

    Raises:
        ValueError: if a flag is missing or an entry has the wrong number of rows.
    """
    out: dict[Any, np.ndarray] = {}
    for key, value in raw.items():
        head, *rest = key
        ted = (_NAMES.get(head, head), *rest)
        if head in ("observations", "infos"):
            try:
                before, after = shifted_pair(value, steps)
            except ValueError as err:
                raise ValueError(f"Minari {name}/{'/'.join(key)}: {err} ({steps} steps)") from err
            out[ted] = before
            out[("next", *ted)] = after
        elif head == "actions":
            out[ted] = np.asarray(value)
        elif head == "rewards":
            out[("next", "reward")] = np.asarray(value).reshape(steps, 1)
    for flag in ("terminations", "truncations"):
        if (flag,) not in raw:
            raise ValueError(
                f"Minari {name} has no {flag!r} entry: the file is not a Minari dataset or is "
                "corrupt. Download it again with download='force'."
            )
    out.update(step_flags(raw[("terminations",)], raw[("truncations",)], close_last=False))
    out[("episode",)] = np.full(steps, number, dtype=np.int64)
    return out


def flatten_episode(fields: dict[str, Any]) -> dict[tuple[str, ...], np.ndarray]:
    """Minari's decoded episode fields as ``{HDF5 path: numeric array}``.

    Dicts nest by key, tuples as ``_index_<i>`` (Minari's HDF5 names); text and other
    non-numeric values are left out, as the h5py reader leaves out non-numeric datasets.
    """
    out: dict[tuple[str, ...], np.ndarray] = {}

    def visit(value: Any, key: tuple[str, ...]) -> None:
        if isinstance(value, dict):
            for sub, item in value.items():
                visit(item, (*key, str(sub)))
        elif isinstance(value, tuple):
            for i, item in enumerate(value):
                visit(item, (*key, f"_index_{i}"))
        elif isinstance(value, np.ndarray | np.generic) and value.dtype.kind in "biuf":
            out[key] = np.asarray(value)

    for field in _FIELDS:
        visit(fields.get(field), (field,))
    return out


def h5py_episodes(handle: Any) -> list[EpisodeSource]:  # Any: an open h5py.File
    """The episodes of an open ``main_data.hdf5``, read with h5py (keep it open while loading)."""
    names = sorted(
        (n for n in handle if n.startswith("episode_")), key=lambda n: int(n.rsplit("_", 1)[-1])
    )
    return [_h5py_episode(handle[name], name) for name in names]


def _h5py_episode(group: Any, name: str) -> EpisodeSource:
    steps = group["rewards"].shape[0]
    number = int(name.rsplit("_", 1)[-1])

    def load() -> dict[Any, np.ndarray]:
        raw = {key: np.asarray(item[()]) for key, item in h5_entries(group).items()}
        return ted_entries(raw, steps, number, name)

    return EpisodeSource(steps, load, name)


def minari_episodes(dataset: Any) -> list[EpisodeSource]:  # Any: a minari.MinariDataset
    """The episodes of a ``minari.MinariDataset``, read through its storage and episode iterator.

    The step counts come from the episodes' metadata (``total_steps``), or from the episode
    itself where a dataset does not record them.
    """
    indices = [int(i) for i in dataset.episode_indices]
    metadata = list(dataset.storage.get_episode_metadata(indices))
    episodes = []
    for index, meta in zip(indices, metadata, strict=True):
        steps = meta.get("total_steps")
        if steps is None:
            steps = len(next(iter(dataset.iterate_episodes([index]))).rewards)
        episodes.append(_minari_episode(dataset, index, int(steps)))
    return episodes


def _minari_episode(dataset: Any, index: int, steps: int) -> EpisodeSource:
    name = f"episode_{index}"

    def load() -> dict[Any, np.ndarray]:
        episode = next(iter(dataset.iterate_episodes([index])))
        fields = {field: getattr(episode, field) for field in _FIELDS}
        return ted_entries(flatten_episode(fields), steps, index, name)

    return EpisodeSource(steps, load, name)
