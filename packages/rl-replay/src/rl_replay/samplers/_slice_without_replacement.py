"""Slices drawn without replacement: :class:`SliceSamplerWithoutReplacement`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from tensordict import NestedKey

from rl_replay.samplers._epoch import Epoch, EpochSampling
from rl_replay.samplers._slice import SliceSampler, _Plan

__all__ = ["SliceSamplerWithoutReplacement"]


class SliceSamplerWithoutReplacement(EpochSampling, SliceSampler, without_replacement=True):
    """Samples slices of data along the first dimension, given start and stop signals, without replacement.

    Works like :class:`SliceSampler`, except that within an epoch every trajectory gives at
    most one slice: the trajectories that are long enough are visited in a random order
    (``shuffle=True``) or in storage order, ``num_slices`` per sample. When they are
    exhausted :attr:`ran_out` is ``True`` and the next sample starts a new epoch; a write
    to the storage also starts a new epoch (the set of trajectories changed).

    Args:
        num_slices (int, optional): number of slices per sample; exclusive with ``slice_len``.
        slice_len (int, optional): length of each slice; exclusive with ``num_slices``.
        drop_last (bool, optional): drop the last, smaller batch of an epoch.
            Defaults to ``False``.
        end_key (NestedKey, optional): the end signal. Defaults to ``("next", "done")``.
        traj_key (NestedKey, optional): the trajectory ids. Defaults to ``"episode"``.
        ends (torch.Tensor, optional): static end signals of the whole storage.
        trajectories (torch.Tensor, optional): static trajectory ids of the whole storage.
        truncated_key (NestedKey, optional): slice-end signal key in ``info``.
            Defaults to ``("next", "truncated")``.
        strict_length (bool, optional): skip trajectories shorter than a slice.
            Defaults to ``True``.
        compile (bool or dict, optional): see :class:`SliceSampler`. Defaults to ``False``.
        span (bool, int or tuple, optional): see :class:`SliceSampler`. Defaults to ``False``.
        use_gpu (bool or torch.device, optional): see :class:`SliceSampler`.
            Defaults to ``False``.
        shuffle (bool, optional): visit trajectories in random order. Defaults to ``True``.
        replacement (bool, optional): accepted for symmetry with
            ``SliceSampler(replacement=False)``; ignored. Defaults to ``False``.

    Examples:
        >>> import torch
        >>> from rl_replay.samplers import SliceSamplerWithoutReplacement
        >>> episodes = torch.tensor([0] * 4 + [1] * 4 + [2] * 4)
        >>> class Storage:
        ...     ndim = 1
        ...     shape = torch.Size([12])
        ...     def __len__(self):
        ...         return 12
        >>> sampler = SliceSamplerWithoutReplacement(num_slices=2, trajectories=episodes)
        >>> index, _ = sampler.sample(Storage(), 4)
        >>> index, _ = sampler.sample(Storage(), 4)  # the last trajectory: one slice only
        >>> index.shape, sampler.ran_out
        (torch.Size([2]), True)
    """

    def __init__(
        self,
        *,
        num_slices: int | None = None,
        slice_len: int | None = None,
        drop_last: bool = False,
        end_key: NestedKey | None = None,
        traj_key: NestedKey | None = None,
        ends: torch.Tensor | None = None,
        trajectories: torch.Tensor | None = None,
        truncated_key: NestedKey | None = ("next", "truncated"),
        strict_length: bool = True,
        compile: bool | dict[str, Any] = False,
        span: bool | int | tuple[bool | int, bool | int] = False,
        use_gpu: torch.device | bool = False,
        shuffle: bool = True,
        replacement: bool = False,
    ) -> None:
        super().__init__(
            num_slices=num_slices,
            slice_len=slice_len,
            end_key=end_key,
            traj_key=traj_key,
            ends=ends,
            trajectories=trajectories,
            truncated_key=truncated_key,
            strict_length=strict_length,
            compile=compile,
            span=span,
            use_gpu=use_gpu,
        )
        self.drop_last = drop_last
        self.shuffle = shuffle
        self._epoch = Epoch(drop_last=drop_last, shuffle=shuffle)

    def _pick(self, plan: _Plan, count: int) -> torch.Tensor:
        return self._epoch.take(
            plan.table.shape[1],
            count,
            key=plan.version,
            device=plan.table.device,
            owner=type(self).__name__,
        )

    def _empty(self) -> None:
        super()._empty()
        self._epoch.reset()

    def state_dict(self) -> dict[str, Any]:
        """Return the boundary tables and the epoch position."""
        return {"slices": super().state_dict(), "epoch": self._epoch.state_dict()}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        super().load_state_dict(state_dict["slices"])
        self._epoch.load_state_dict(state_dict["epoch"])
