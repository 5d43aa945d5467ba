"""Slices whose starts are drawn by priority: :class:`PrioritizedSliceSampler`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from tensordict import NestedKey

from rl_replay.samplers._prioritized import PrioritizedSampler
from rl_replay.samplers._slice import SliceSampler
from rl_replay.samplers._trajectories import Segments, TrajectoryIndex
from rl_replay.samplers.base import check_batch_size, check_not_empty, check_replacement

__all__ = ["PrioritizedSliceSampler"]

_ROUNDS = 16  # rejection rounds before falling back to an exact draw over all valid starts


class PrioritizedSliceSampler(SliceSampler, PrioritizedSampler):
    """Samples slices of data along the first dimension, given start and stop signals, using prioritized sampling.

    Every stored element has a priority, as in :class:`PrioritizedSampler`. A slice start
    is drawn with probability proportional to ``priority ** alpha`` among the positions
    that can start a slice (as many steps left in the trajectory as the slice needs, see
    :class:`SliceSampler`); the slice is the ``seq_len`` steps from there.
    ``info["priority_weight"]`` holds the importance weight of each slice's start, repeated
    over the slice, and ``update_priority`` sets per-element priorities.

    Draws are exact: candidates are drawn from the sum tree and the invalid ones (too close
    to a trajectory end) rejected, which samples from the priorities restricted to valid
    starts; after a few rejection rounds the remaining slices are drawn over an explicit
    list of valid starts.

    Args:
        max_capacity (int): maximum number of elements (over all storage dims).
        alpha (float): priority exponent.
        beta (float): importance-sampling exponent.
        eps (float, optional): added to every priority. Defaults to ``1e-8``.
        dtype (torch.dtype, optional): the tree dtype. Defaults to ``torch.float``.
        reduction (str, optional): see :class:`PrioritizedSampler`. Defaults to ``"max"``.
        num_slices, slice_len, end_key, traj_key, ends, trajectories, cache_values,
            truncated_key, span, strict_length, compile, use_gpu: see :class:`SliceSampler`.
        max_priority_within_buffer (bool, optional): see :class:`PrioritizedSampler`.
            Defaults to ``False``.
        replacement (bool, optional): must stay ``True``: there is no prioritized
            slice sampler without replacement (``False`` raises ``TypeError``).
            Defaults to ``True``.

    Examples:
        >>> import torch
        >>> from rl_replay.samplers import PrioritizedSliceSampler
        >>> class Storage:
        ...     ndim = 1
        ...     shape = torch.Size([8])
        ...     def __len__(self):
        ...         return 8
        >>> sampler = PrioritizedSliceSampler(
        ...     8, alpha=1.0, beta=1.0, num_slices=2, trajectories=torch.tensor([0] * 4 + [1] * 4)
        ... )
        >>> sampler.extend(torch.arange(8))
        >>> sampler.update_priority(torch.arange(8), torch.tensor([0.0, 0, 0, 0, 0, 0, 1, 1]))
        >>> index, info = sampler.sample(Storage(), 4)
        >>> index.tolist()  # only position 6 starts a 2-step slice with positive priority
        [6, 7, 6, 7]
    """

    def __init__(
        self,
        max_capacity: int,
        alpha: float,
        beta: float,
        eps: float = 1e-8,
        dtype: torch.dtype = torch.float,
        reduction: str = "max",
        *,
        num_slices: int | None = None,
        slice_len: int | None = None,
        end_key: NestedKey | None = None,
        traj_key: NestedKey | None = None,
        ends: torch.Tensor | None = None,
        trajectories: torch.Tensor | None = None,
        cache_values: bool = False,
        truncated_key: NestedKey | None = ("next", "truncated"),
        span: bool | int | tuple[bool | int, bool | int] = False,
        strict_length: bool = True,
        compile: bool | dict[str, Any] = False,
        use_gpu: bool | torch.device = False,
        max_priority_within_buffer: bool = False,
        replacement: bool = True,
    ) -> None:
        check_replacement(replacement, type(self).__name__, variant=None)
        SliceSampler.__init__(
            self,
            num_slices=num_slices,
            slice_len=slice_len,
            end_key=end_key,
            traj_key=traj_key,
            ends=ends,
            trajectories=trajectories,
            cache_values=cache_values,
            truncated_key=truncated_key,
            strict_length=strict_length,
            compile=compile,
            span=span,
            use_gpu=use_gpu,
        )
        PrioritizedSampler.__init__(
            self,
            max_capacity,
            alpha,
            beta,
            eps=eps,
            dtype=dtype,
            reduction=reduction,
            max_priority_within_buffer=max_priority_within_buffer,
        )

    def attach_storage(self, storage: Any) -> None:  # Any: a Storage
        """Remember the storage and move the priority trees to its device."""
        PrioritizedSampler.attach_storage(self, storage)

    def extend(self, index: torch.Tensor) -> None:
        """Update the trajectory boundaries and give the written elements the default priority."""
        SliceSampler.extend(self, index)
        PrioritizedSampler.extend(self, index)

    def mark_update(self, index: Any, *, storage: Any = None) -> None:  # Any: storage index form
        """Re-read the boundaries of rows overwritten in place and reset their priority."""
        SliceSampler.mark_update(self, index, storage=storage)
        PrioritizedSampler.mark_update(self, index, storage=storage)

    def sample(self, storage: Any, batch_size: int) -> tuple[Any, dict[str, Any]]:
        """Draw slices whose starts follow the priorities.

        Raises:
            ValueError: if ``batch_size`` is not a multiple of ``num_slices`` / ``slice_len``.
            RuntimeError: if the storage is empty, no valid start has a positive priority,
                or (``strict_length=True``) no trajectory is long enough.
        """
        name = type(self).__name__
        check_batch_size(batch_size, name)
        stored = len(storage)
        check_not_empty(stored, name)
        num_slices, seq_len = self._slice_shape(batch_size)
        with self._lock:
            self._cover(stored)
            traj_index, seg = self._segments(storage)
            plan = self._plan(traj_index, seg, seq_len)  # raises when none is long enough
            k, offset, flat = self._draw_starts(traj_index, seg, num_slices, seq_len)
            length = seg.length[k]
            index, info = self._gather(
                storage, traj_index, seg.row[k], seg.col[k], length, offset, plan
            )
            sizes = torch.minimum(offset + seq_len, length) - offset
            weight = self._weights(self._sum_tree.leaves.index_select(0, flat))
            info["priority_weight"] = weight.repeat_interleave(sizes.to(flat.device))
        return index, info

    def _valid_offset_limit(self, length: torch.Tensor, seq_len: int) -> torch.Tensor:
        """Largest start offset a slice may have in segments of ``length`` (``-1``: none)."""
        right = min(self._span_steps(seq_len)[1], seq_len - 1)
        high = length - seq_len + right
        if self.strict_length:
            return torch.where(length >= seq_len, high, -1)
        return high.clamp_min(0)

    def _draw_starts(
        self, traj_index: TrajectoryIndex, seg: Segments, count: int, seq_len: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``count`` valid slice starts: (segment, offset, flat storage position)."""
        cols = traj_index.cols
        found: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        missing = count
        for _ in range(_ROUNDS):
            flat, _ = self._draw(2 * missing)
            k, offset = traj_index.locate(flat // cols, flat % cols)
            limit = self._valid_offset_limit(seg.length[k.clamp_min(0)], seq_len)
            ok = ((k >= 0) & (offset <= limit)).nonzero().squeeze(-1)[:missing]
            found.append((k[ok], offset[ok], flat[ok]))
            missing -= ok.numel()
            if missing == 0:
                break
        else:
            found.append(self._draw_exact(traj_index, seg, missing, seq_len))
        k, offset, flat = (torch.cat(parts) for parts in zip(*found))
        return k, offset, flat

    def _draw_exact(
        self, traj_index: TrajectoryIndex, seg: Segments, count: int, seq_len: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Draw over the explicit list of valid starts (``O(capacity)``: a rare fallback)."""
        sizes = (self._valid_offset_limit(seg.length, seq_len) + 1).clamp_min(0)
        owner = torch.repeat_interleave(torch.arange(sizes.numel(), device=sizes.device), sizes)
        offset = torch.arange(owner.numel(), device=sizes.device) - (sizes.cumsum(0) - sizes)[owner]
        rows = (seg.row[owner] + offset) % traj_index.rows
        flat = rows * traj_index.cols + seg.col[owner]
        weights = self._sum_tree[flat.to(self._sum_tree.device)]
        if not bool((weights > 0).any()):
            raise RuntimeError(
                f"{type(self).__name__} cannot sample: expected a positive priority on at least "
                f"one valid slice start (slices of {seq_len} steps), found none. Update "
                "priorities with positive values or use eps > 0."
            )
        pick = torch.multinomial(weights, count, replacement=True).to(owner.device)
        return owner[pick], offset[pick], flat[pick]

    def _empty(self) -> None:
        SliceSampler._empty(self)
        PrioritizedSampler._empty(self)

    def state_dict(self) -> dict[str, Any]:
        """Return the boundary tables and the priority trees."""
        return {
            "slices": SliceSampler.state_dict(self),
            "priorities": PrioritizedSampler.state_dict(self),
        }

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        SliceSampler.load_state_dict(self, state_dict["slices"])
        PrioritizedSampler.load_state_dict(self, state_dict["priorities"])

    def __repr__(self) -> str:
        return f"{SliceSampler.__repr__(self)[:-1]}, {PrioritizedSampler.__repr__(self).split('(', 1)[1]}"
