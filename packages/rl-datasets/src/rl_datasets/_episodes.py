"""Sources stored one episode at a time (Minari, Roboset, V-D4RL, Gen-DGRL, Open X):
each episode becomes a block of TED rows of one contiguous memory-mapped dataset.

A reader describes its episodes as :class:`EpisodeSource` objects: the number of steps
(cheap to read) and a function that loads the episode's TED entries.  The first episode
fixes the entries and their shapes; every episode is then written at its offset.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase
from tqdm.auto import tqdm

from rl_datasets._ted import allocate

__all__ = ["EpisodeSource", "h5_entries", "shifted_pair", "step_flags", "write_episodes"]


@dataclass
class EpisodeSource:
    """One episode: its step count and a loader of ``{TED key: array with steps rows}``."""

    steps: int
    load: Callable[[], dict[Any, np.ndarray]]
    name: str


def write_episodes(
    dest: Path, episodes: Sequence[EpisodeSource], *, owner: str, progress: bool = True
) -> TensorDictBase:
    """Write the episodes one after the other into a TED tensordict memory-mapped at ``dest``.

    Raises:
        ValueError: if there is no episode, or an episode's entries differ from the first's.
    """
    if not episodes:
        raise ValueError(
            f"{owner} found no episode in the downloaded files; they are not a dataset."
        )
    total = sum(e.steps for e in episodes)
    first = episodes[0].load()
    specs = {key: (tuple(v.shape[1:]), _dtype(v)) for key, v in first.items()}
    out = allocate(dest, specs, total)
    offset = 0
    with tqdm(
        total=total, unit="step", desc=f"converting {owner}", disable=not progress, leave=False
    ) as bar:
        for i, episode in enumerate(episodes):
            entries = first if i == 0 else episode.load()
            if set(entries) != set(specs):
                raise ValueError(
                    f"{owner}: episode {episode.name} has the entries {sorted(map(str, entries))}, "
                    f"expected those of the first episode {sorted(map(str, specs))}. The files are "
                    "inconsistent; download them again with download='force'."
                )
            for key, value in entries.items():
                if value.shape != (episode.steps, *specs[key][0]):
                    raise ValueError(
                        f"{owner}: episode {episode.name} entry {key!r} has shape {value.shape}, "
                        f"expected {(episode.steps, *specs[key][0])}. The file is corrupt."
                    )
                out.get(key).numpy()[offset : offset + episode.steps] = value
            offset += episode.steps
            bar.update(episode.steps)
    return out


def _dtype(array: np.ndarray) -> torch.dtype:
    return torch.from_numpy(np.zeros((), dtype=array.dtype)).dtype


def h5_entries(group: Any, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """The numeric datasets of an h5py group, recursively, keyed by their path tuple."""
    out = {}
    for name, item in group.items():
        if hasattr(item, "keys"):
            out.update(h5_entries(item, (*prefix, name)))
        elif item.dtype.kind in "biuf":
            out[(*prefix, name)] = item
    return out


def shifted_pair(values: np.ndarray, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """``(value at step t, value after step t)`` from per-step values.

    ``steps + 1`` values (the reset value first) give exact pairs; ``steps`` values (the
    values returned by each step) give the step's own value as the previous step's one,
    zeros at the first step.
    """
    values = np.asarray(values)
    if values.shape[0] == steps + 1:
        return values[:-1], values[1:]
    if values.shape[0] == steps:
        before = np.zeros_like(values)
        before[1:] = values[:-1]
        return before, values
    raise ValueError(f"expected {steps} or {steps + 1} rows, got {values.shape[0]}")


def step_flags(
    terminated: np.ndarray, truncated: np.ndarray | None, *, close_last: bool
) -> dict[Any, np.ndarray]:
    """TED done flags of one episode: the ``next`` flags from the step's signals, the root
    ones all ``False``; ``close_last`` marks the last step truncated if nothing ended it."""
    terminated = np.asarray(terminated).astype(bool).reshape(-1, 1)
    truncated = (
        np.zeros_like(terminated)
        if truncated is None
        else np.asarray(truncated).astype(bool).reshape(-1, 1)
    )
    if close_last and terminated.shape[0] and not (terminated[-1, 0] or truncated[-1, 0]):
        truncated = truncated.copy()
        truncated[-1, 0] = True
    done = terminated | truncated
    zeros = np.zeros_like(done)
    return {
        ("next", "terminated"): terminated,
        ("next", "truncated"): truncated,
        ("next", "done"): done,
        ("terminated",): zeros,
        ("truncated",): zeros,
        ("done",): zeros,
    }
