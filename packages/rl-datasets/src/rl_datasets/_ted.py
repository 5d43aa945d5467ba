"""TED building blocks shared by the readers: memory-mapped allocation, episode ids,
trajectory splitting, and the storage a converted dataset is sampled from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey

from rl_replay import TensorStorage

__all__ = [
    "allocate",
    "describe",
    "episode_ids",
    "full_storage",
    "split_trajectories",
]


def allocate(
    path: Path,
    specs: dict[NestedKey, tuple[tuple[int, ...], torch.dtype]],
    n: int | tuple[int, ...],
) -> TensorDictBase:
    """Memory-mapped, uninitialised ``[*batch, *shape]`` tensors under ``path``, one per key.

    Examples:
        >>> import tempfile, torch
        >>> td = allocate(Path(tempfile.mkdtemp()), {("next", "reward"): ((1,), torch.float32)}, 5)
        >>> td["next", "reward"].shape, td.batch_size
        (torch.Size([5, 1]), torch.Size([5]))
    """
    batch = (n,) if isinstance(n, int) else tuple(n)
    template = TensorDict({}, batch_size=batch)
    for key, (shape, dtype) in specs.items():
        template.set(key, torch.zeros(shape, dtype=dtype).expand(*batch, *shape))
    return template.memmap_like(path, num_threads=0)


def describe(td: TensorDictBase) -> dict[str, dict[str, Any]]:
    """``{"a/b": {"shape": [...], "dtype": "torch.float32"}}`` for every leaf (per element)."""
    out = {}
    for key, value in td.items(True, True):
        name = "/".join(key) if isinstance(key, tuple) else key
        out[name] = {"shape": list(value.shape[td.batch_dims :]), "dtype": str(value.dtype)}
    return out


def episode_ids(done: torch.Tensor) -> torch.Tensor:
    """Episode index of each step from the per-step end flags (a step ending an episode
    belongs to it; the next step starts a new one).

    Examples:
        >>> episode_ids(torch.tensor([False, True, False, False, True, False])).tolist()
        [0, 0, 1, 1, 1, 2]
    """
    done = done.reshape(done.shape[0], -1).any(-1)
    ids = torch.zeros(done.shape[0], dtype=torch.int64)
    if done.shape[0] > 1:
        ids[1:] = done[:-1].to(torch.int64).cumsum(0)
    return ids


def full_storage(td: TensorDictBase) -> TensorStorage:
    """A TensorStorage over every row of ``td`` (no copy of the data).

    rl-replay's ``TensorStorage(container)`` starts empty; writing the last row back onto
    itself through the public ``set`` marks every row as written without copying the rest.
    """
    storage = TensorStorage(td)
    rows = td.batch_size[0]
    if rows and storage._len_along_dim0 < rows:
        last = slice(rows - 1, rows)
        storage.set(last, td[last].clone(), set_cursor=True)
    return storage


def split_trajectories(
    td: TensorDictBase, episode: torch.Tensor, path: Path, *, done_keys: tuple = ()
) -> TensorDictBase:
    """Pad each episode to the longest one: ``[num_episodes, max_len]`` memmaps under ``path``.

    Adds ``"mask"`` (valid steps) and ``"traj_ids"``; the ``done_keys`` of the last valid
    step of each episode are set to ``True``.  Padded steps are zeros.

    Examples:
        >>> import tempfile
        >>> data = TensorDict({"obs": torch.arange(5.0)}, [5])
        >>> out = split_trajectories(data, torch.tensor([0, 0, 0, 1, 1]), Path(tempfile.mkdtemp()))
        >>> out["obs"].tolist(), out["mask"].tolist()
        ([[0.0, 1.0, 2.0], [3.0, 4.0, 0.0]], [[True, True, True], [True, True, False]])
    """
    episode = episode.reshape(-1)
    change = torch.ones(episode.shape[0], dtype=torch.bool)
    change[1:] = episode[1:] != episode[:-1]
    starts = change.nonzero().squeeze(-1)
    lengths = torch.diff(starts, append=torch.tensor([episode.shape[0]]))
    max_len = int(lengths.max()) if lengths.numel() else 0
    steps = torch.arange(max_len)
    mask = steps.unsqueeze(0) < lengths.unsqueeze(1)
    gather = (starts.unsqueeze(1) + steps.unsqueeze(0)).clamp_max(episode.shape[0] - 1)
    shape = (starts.shape[0], max_len)
    specs = {key: (tuple(v.shape[1:]), v.dtype) for key, v in td.items(True, True)}
    specs["mask"] = ((), torch.bool)
    specs["traj_ids"] = ((), torch.int64)
    out = allocate(path, specs, shape)
    flat_mask = mask.reshape(-1)
    flat_gather = gather.reshape(-1)
    for key, value in td.items(True, True):
        dest = out.get(key).view(-1, *value.shape[1:])
        dest.copy_(value[flat_gather])
        dest[~flat_mask] = 0
    out.get("mask").copy_(mask)
    out.get("traj_ids").copy_(episode[starts].unsqueeze(1).expand(shape))
    for key in done_keys:
        if key in out.keys(True):
            out.get(key).view(-1, *out.get(key).shape[2:])[
                torch.arange(shape[0]) * max_len + lengths - 1
            ] = True
    return out
