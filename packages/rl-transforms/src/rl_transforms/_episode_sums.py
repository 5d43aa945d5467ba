"""Episode-aware running sums over the time dim of stored trajectories (offline ``RewardSum``)."""

from __future__ import annotations

import torch
from tensordict import NestedKey, TensorDictBase


def time_dim(tensordict: TensorDictBase, owner: str) -> int:
    """The index of the batch dim named ``"time"``, else the last batch dim.

    Raises:
        ValueError: if the tensordict has no batch dim.
    """
    if not tensordict.batch_dims:
        raise ValueError(
            f"{owner} on stored data sums along time: At least one dimension of the tensordict "
            f"must be the time dim, got batch_size={tuple(tensordict.batch_size)}. Give the "
            f"data a time dim (named 'time'), or use the transform in an env."
        )
    names = list(tensordict.names)
    return names.index("time") if "time" in names else tensordict.batch_dims - 1


def done_next_to(key: NestedKey) -> NestedKey:
    """The ``"done"`` entry at the level of ``key``."""
    return "done" if isinstance(key, str) else (*key[:-1], "done")


def episode_cumsum(values: torch.Tensor, done: torch.Tensor | None, dim: int) -> torch.Tensor:
    """Cumulative sum of ``values`` along ``dim``, restarting after each ``done`` step.

    Examples:
        >>> r = torch.ones(5, 1)
        >>> d = torch.tensor([[False], [True], [False], [False], [False]])
        >>> episode_cumsum(r, d, 0).squeeze(-1)
        tensor([1., 2., 1., 2., 3.])
    """
    if done is None:
        return values.cumsum(dim)
    steps = values.movedim(dim, 0)
    ends = done.movedim(dim, 0).to(torch.bool)
    while ends.ndim < steps.ndim:
        ends = ends.unsqueeze(-1)
    out = torch.empty_like(steps)
    running = torch.zeros_like(steps[0])
    for t in range(steps.shape[0]):
        running = running + steps[t]
        out[t] = running
        running = torch.where(ends[t], torch.zeros_like(running), running)
    return out.movedim(0, dim)
