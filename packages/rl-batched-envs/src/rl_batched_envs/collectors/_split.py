"""``split_trajectories``: a ``[*batch, time]`` batch as zero-padded ``[n_traj, max_len]`` rows."""

from __future__ import annotations

import torch
from tensordict import NestedKey, TensorDictBase

TRAJ_KEY: tuple[str, str] = ("collector", "traj_ids")
MASK_KEY: tuple[str, str] = ("collector", "mask")


def split_trajectories(
    rollout_tensordict: TensorDictBase, *, trajectory_key: NestedKey | None = None
) -> TensorDictBase:
    """Split a collected batch into one zero-padded row per trajectory.

    The trajectories are told apart by their ids (``("collector", "traj_ids")``),
    each one a run of consecutive steps of one env. Rows keep the order in which
    the trajectories appear (env by env, then time); ``("collector", "mask")``
    marks the valid (non-padding) steps.

    Args:
        rollout_tensordict (TensorDictBase): a batch whose last dim is time.
        trajectory_key (NestedKey, optional): the trajectory ids. Defaults to
            ``("collector", "traj_ids")``.

    Raises:
        KeyError: the batch has no trajectory ids.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> batch = TensorDict({"x": torch.arange(5.0),
        ...     "collector": {"traj_ids": torch.tensor([0, 0, 0, 1, 1])}}, [5])
        >>> out = split_trajectories(batch)
        >>> out["x"]
        tensor([[0., 1., 2.],
                [3., 4., 0.]])
        >>> out["collector", "mask"]
        tensor([[ True,  True,  True],
                [ True,  True, False]])
    """
    key = TRAJ_KEY if trajectory_key is None else trajectory_key
    ids = rollout_tensordict.get(key, None)
    if ids is None:
        raise KeyError(
            f"split_trajectories needs trajectory ids at {key!r}; the batch has "
            f"{sorted(str(k) for k in rollout_tensordict.keys(True, True))}. Collect with "
            f"track_traj_ids=True or pass trajectory_key=."
        )
    flat = rollout_tensordict.reshape(-1)
    flat_ids = ids.reshape(-1)
    _, counts = torch.unique_consecutive(flat_ids, return_counts=True)
    rows = torch.repeat_interleave(torch.arange(counts.numel()), counts)
    starts = torch.cumsum(counts, 0) - counts
    cols = torch.arange(flat_ids.numel()) - starts[rows]
    max_len = int(counts.max()) if counts.numel() else 0
    out = flat[:1].expand(counts.numel(), max_len).clone().zero_() if max_len else flat[:0]
    out[rows, cols] = flat
    mask = torch.zeros(counts.numel(), max_len, dtype=torch.bool)
    mask[rows, cols] = True
    out.set(MASK_KEY, mask)
    out.names = [None, "time"] if out.batch_dims == 2 else None
    return out
