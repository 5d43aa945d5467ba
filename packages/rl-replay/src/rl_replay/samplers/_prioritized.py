"""Proportional prioritized sampling: :class:`PrioritizedSampler`."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import torch

from rl_replay.samplers._segment_tree import EmptyTreeError, SegmentTree
from rl_replay.samplers.base import (
    Sampler,
    check_batch_size,
    check_not_empty,
    check_replacement,
    device_of,
    ravel,
    rows_of,
    unravel,
)

__all__ = ["PrioritizedSampler"]

REDUCTIONS = ("max", "min", "median", "mean", "sum")
_SCATTER_REDUCE = {"max": "amax", "min": "amin", "mean": "mean", "sum": "sum"}


class PrioritizedSampler(Sampler):
    """Prioritized sampler for replay buffer.

    Implements proportional prioritization (Schaul et al., 2015,
    https://arxiv.org/abs/1511.05952): element ``i`` is drawn with probability
    ``P(i) = p_i ** alpha / sum_k p_k ** alpha`` and ``info["priority_weight"]`` holds the
    importance weight ``(N * P(i)) ** -beta`` divided by the largest such weight in the
    buffer, i.e. ``(p_i ** alpha / min_k p_k ** alpha) ** -beta`` where the minimum runs
    over the elements that can be drawn (positive priority). ``update_priority``
    stores ``(priority + eps) ** alpha``; new elements get the largest priority seen so far
    (``1.0`` before any update). A sum tree and a min tree (torch tensors on the storage's
    device) make batch sampling and batch updates vectorised, ``O(batch * log(capacity))``.

    Args:
        max_capacity (int): maximum number of elements (over all storage dims).
        alpha (float): exponent of the priorities (``0`` gives uniform sampling).
        beta (float): importance-sampling exponent (``0`` gives unit weights).
        eps (float, optional): added to every priority. Defaults to ``1e-8``.
        dtype (torch.dtype, optional): the tree dtype. Defaults to ``torch.float``.
        reduction (str, optional): how several priorities given for one element are
            reduced (priorities with trailing dims, e.g. per time step of a stored
            trajectory, or a repeated index): ``"max"``, ``"min"``, ``"median"``,
            ``"mean"`` or ``"sum"``. Defaults to ``"max"``.
        max_priority_within_buffer (bool, optional): if ``True``, new elements get the
            largest priority currently stored instead of the largest ever seen.
            Defaults to ``False``.
        replacement (bool, optional): must stay ``True``: there is no prioritized
            sampler without replacement (``False`` raises ``TypeError``).
            Defaults to ``True``.

    Raises:
        ValueError: for a non-positive ``max_capacity``, a negative ``alpha``, ``beta`` or
            ``eps``, or an unknown ``reduction``.

    Examples:
        >>> import torch
        >>> from rl_replay.samplers import PrioritizedSampler
        >>> class Storage:
        ...     ndim = 1
        ...     def __len__(self):
        ...         return 4
        >>> sampler = PrioritizedSampler(4, alpha=1.0, beta=1.0, eps=0.0)
        >>> sampler.extend(torch.arange(4))
        >>> sampler.update_priority(torch.arange(4), torch.tensor([0.0, 1.0, 2.0, 4.0]))
        >>> _ = torch.manual_seed(0)
        >>> index, info = sampler.sample(Storage(), 1000)
        >>> 0 in index  # zero priority: never drawn
        False
        >>> (index == 3).float().mean().round(decimals=1)  # 4 / (1 + 2 + 4)
        tensor(0.6000)
        >>> info["priority_weight"][index == 3].unique()  # (4 / 1) ** -beta
        tensor([0.2500])
    """

    def __init__(
        self,
        max_capacity: int,
        alpha: float,
        beta: float,
        eps: float = 1e-8,
        dtype: torch.dtype = torch.float,
        reduction: str = "max",
        max_priority_within_buffer: bool = False,
        *,
        replacement: bool = True,
    ) -> None:
        Sampler.__init__(self)
        name = type(self).__name__
        check_replacement(replacement, name, variant=None)
        if isinstance(max_capacity, bool) or not isinstance(max_capacity, int) or max_capacity <= 0:
            raise ValueError(
                f"{name} expected max_capacity to be a positive int, got {max_capacity!r}. "
                "Pass the storage capacity, e.g. PrioritizedSampler(1000, alpha=0.7, beta=0.5)."
            )
        for arg, value in (("alpha", alpha), ("beta", beta), ("eps", eps)):
            if not value >= 0:
                raise ValueError(f"{name} expected {arg} >= 0, got {arg}={value!r}.")
        if reduction not in REDUCTIONS:
            raise ValueError(f"{name} expected reduction in {REDUCTIONS}, got {reduction!r}.")
        self._max_capacity = max_capacity
        self._alpha = float(alpha)
        self._beta = float(beta)
        self._eps = float(eps)
        self.dtype = dtype
        self.reduction = reduction
        self._max_priority_within_buffer = max_priority_within_buffer
        self._covered = 0  # flat positions [0, _covered) may hold a priority; the rest never did
        self._last_high = -1  # the largest position of the last checked index
        self._build_trees(torch.device("cpu"))

    # ----------------------------------------------------------------- properties
    @property
    def max_capacity(self) -> int:
        """Maximum number of elements the trees hold."""
        return self._max_capacity

    @property
    def alpha(self) -> float:
        """Priority exponent."""
        return self._alpha

    @alpha.setter
    def alpha(self, value: float) -> None:
        """Change the priority exponent; stored values are re-expressed with it exactly."""
        value = float(value)
        if not value >= 0:
            raise ValueError(
                f"{type(self).__name__}: alpha must be greater or equal to 0, got alpha={value!r}."
            )
        if value == self._alpha:
            return
        if self._alpha == 0:  # every stored value is 1: the priorities cannot be recovered
            warnings.warn(
                f"{type(self).__name__}: alpha changes from 0, where every stored priority "
                "reads 1; stored elements keep equal priorities until they are updated.",
                stacklevel=2,
            )
        else:  # (p + eps) ** old -> (p + eps) ** new, in closed form
            ratio = value / self._alpha
            with self._lock:
                for tree in (self._sum_tree, self._min_tree, self._max_tree):
                    if tree is not None:
                        leaves = tree.leaves
                        tree.load_leaves(torch.where(leaves > 0, leaves.pow(ratio), leaves))
        self._alpha = value

    @property
    def beta(self) -> float:
        """Importance-sampling exponent."""
        return self._beta

    @beta.setter
    def beta(self, value: float) -> None:
        self._beta = float(value)

    @property
    def default_priority(self) -> float:
        """The tree value (``priority ** alpha``) that new elements receive."""
        return float(self._default_value())

    def _default_value(self) -> torch.Tensor:
        if self._max_tree is not None:
            top = self._max_tree.total()
            return torch.where(top > -torch.inf, top, torch.ones_like(top))
        return (self._max_priority + self._eps) ** self._alpha

    def _build_trees(self, device: torch.device) -> None:
        cap, dtype = self._max_capacity, self.dtype
        self._sum_tree = SegmentTree(cap, op="sum", dtype=dtype, device=device)
        self._min_tree = SegmentTree(cap, op="min", dtype=dtype, device=device)
        self._max_tree = (
            SegmentTree(cap, op="max", dtype=dtype, device=device)
            if self._max_priority_within_buffer
            else None
        )
        self._max_priority = torch.ones((), dtype=dtype, device=device)

    def _to(self, device: torch.device) -> None:
        if device != self._sum_tree.device:
            for tree in (self._sum_tree, self._min_tree, self._max_tree):
                if tree is not None:
                    tree.to(device)
            self._max_priority = self._max_priority.to(device)

    def attach_storage(self, storage: Any) -> None:  # Any: a Storage
        """Remember the storage and move the trees to its device."""
        super().attach_storage(storage)
        self._to(device_of(storage))

    # ----------------------------------------------------------------- writes
    def extend(self, index: torch.Tensor) -> None:
        """Give the default priority to every element of the written cursor-dim ``index``."""
        flat = self._written_positions(index)
        self._set_values(flat, self._default_value())

    def mark_update(self, index: Any, *, storage: Any = None) -> None:  # Any: storage index form
        """Reset the elements at ``index`` (overwritten in place) to the default priority."""
        storage = self._storage if storage is None else storage
        if isinstance(index, tuple) and storage is not None and len(index) == len(storage.shape):
            flat = ravel(index, storage)  # a full multi-dim index: exactly these elements
        else:
            rows = storage.shape[0] if storage is not None else self._max_capacity
            flat = self._written_positions(rows_of(index, rows))
        self._set_values(flat, self._default_value())

    def _written_positions(self, index: torch.Tensor) -> torch.Tensor:
        """Cursor-dim positions -> flat positions of every element in those rows."""
        rows = torch.as_tensor(index, dtype=torch.long).reshape(-1)
        storage = self._storage
        if storage is None or len(getattr(storage, "shape", ())) <= 1:
            return rows
        inner = int(torch.Size(storage.shape[1:]).numel())
        return (rows.unsqueeze(-1) * inner + torch.arange(inner, device=rows.device)).reshape(-1)

    def _flat_index(self, index: Any, storage: Any) -> torch.Tensor:
        storage = self._storage if storage is None else storage
        if storage is not None and isinstance(index, torch.Tensor) and index.ndim == 2:
            if index.shape[-1] == len(getattr(storage, "shape", ())) > 1:
                index = index.unbind(-1)  # stacked (N, ndim) index from a sampled tensordict
        if storage is None:
            return torch.as_tensor(index, dtype=torch.long).reshape(-1)
        return ravel(index, storage)

    def _check_index(self, flat: torch.Tensor, storage: Any = None) -> torch.Tensor:
        """``flat`` on the trees' device, after checking it lies in ``[0, max_capacity)``.

        With a ``storage``, positions at or past its length (never written) are refused too.
        """
        flat = flat.to(self._sum_tree.device)
        if flat.numel() == 0:
            return flat
        # one reduction and two scalar reads; the masked report is built only on failure
        low, high = torch.aminmax(flat)
        low, high = int(low), int(high)
        self._last_high = high
        if low < 0 or high >= self._max_capacity:
            bad = (flat < 0) | (flat >= self._max_capacity)
            raise ValueError(
                f"{type(self).__name__} expected indices in [0, max_capacity={self._max_capacity}), "
                f"got {flat[bad][:5].tolist()}. Build the sampler with a max_capacity at least "
                "the storage size."
            )
        if storage is not None and high >= len(storage):
            stored = len(storage)
            raise ValueError(
                f"{type(self).__name__}.update_priority expected indices of stored elements, in "
                f"[0, len(storage)={stored}), got {flat[flat >= stored][:5].tolist()}. Those "
                "positions were never written; update the priorities of written indices."
            )
        return flat

    def _set_values(self, flat: torch.Tensor, values: torch.Tensor | float) -> None:
        """Write tree values at the (checked) flat positions ``flat``."""
        device = self._sum_tree.device
        flat = self._check_index(flat)
        if flat.numel() == 0:
            return
        self._update_trees(flat, torch.as_tensor(values, dtype=self.dtype, device=device))
        self._covered = max(self._covered, self._last_high + 1)

    def _update_trees(self, flat: torch.Tensor, values: torch.Tensor) -> None:
        with self._lock:
            nodes = self._sum_tree.ancestors(flat)
            self._sum_tree.update(flat, values, nodes)
            # zero-priority elements are never drawn, so they do not bound the weights
            self._min_tree.update(flat, torch.where(values > 0, values, torch.inf), nodes)
            if self._max_tree is not None:
                self._max_tree.update(flat, values, nodes)

    # ----------------------------------------------------------------- priorities
    def update_priority(
        self, index: Any, priority: float | torch.Tensor, *, storage: Any = None
    ) -> None:  # Any: an index in the storage's own form (tensor, tuple or (N, ndim) tensor)
        """Set the priority of the elements at ``index``.

        Args:
            index: the sampled index (flat tensor, tuple of tensors, or an ``(N, ndim)``
                stacked index as written into sampled tensordicts).
            priority (float or torch.Tensor): a scalar, or one priority per index; extra
                trailing dims are reduced with ``reduction``.
            storage (Storage, optional): the storage ``index`` refers to. Defaults to the
                attached storage.

        Raises:
            ValueError: if ``priority`` is negative, infinite or nan, has a length other
                than the number of indices, or an index is out of ``[0, max_capacity)`` or
                (with a storage) at or past the storage length (never written).
        """
        storage = self._storage if storage is None else storage
        flat = self._check_index(self._flat_index(index, storage), storage)
        priority = self._check_priority(priority, flat.numel())
        flat, priority = self._reduce_duplicates(flat, priority)
        with self._lock:  # everything is validated: nothing below can fail half-way
            if priority.numel():
                self._max_priority = torch.maximum(self._max_priority, priority.max())
                self._update_trees(flat, (priority + self._eps) ** self._alpha)
                self._covered = max(self._covered, self._last_high + 1)

    def _check_priority(self, priority: float | torch.Tensor, count: int) -> torch.Tensor:
        name = type(self).__name__
        priority = torch.as_tensor(priority, dtype=self.dtype, device=self._sum_tree.device)
        if priority.ndim > 1 and priority.shape[0] == count:
            priority = _reduce_trailing(priority.reshape(count, -1), self.reduction)
        elif priority.numel() == 1:
            priority = priority.reshape(1).expand(count)
        priority = priority.reshape(-1)
        if priority.numel() != count:
            raise ValueError(
                f"{name}.update_priority expected one priority per index ({count} values) or a "
                f"scalar, got a priority of shape {tuple(priority.shape)}. Pass priorities "
                "aligned with the sampled index."
            )
        # aminmax propagates nan, and nan >= 0 is False: one reduction checks all three
        if priority.numel() and not _finite_non_negative(priority):
            bad = ~((priority >= 0) & priority.isfinite())
            raise ValueError(
                f"{name}.update_priority expected finite, non-negative priorities, got "
                f"{priority[bad][:5].tolist()} at positions {bad.nonzero().flatten()[:5].tolist()}. "
                "Check the loss producing the priorities (e.g. clamp or take abs of td_error)."
            )
        return priority

    def _reduce_duplicates(
        self, flat: torch.Tensor, priority: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        unique, inverse = torch.unique(flat, return_inverse=True)
        if unique.numel() == flat.numel():
            return flat, priority
        if self.reduction == "median":
            order = torch.argsort(inverse * (priority.numel() + 1) + _rank(priority))
            counts = torch.bincount(inverse, minlength=unique.numel())
            starts = counts.cumsum(0) - counts
            return unique, priority[order][starts + (counts - 1) // 2]
        reduced = torch.zeros(unique.shape, dtype=priority.dtype, device=priority.device)
        reduced.scatter_reduce_(
            0, inverse, priority, reduce=_SCATTER_REDUCE[self.reduction], include_self=False
        )
        return unique, reduced

    # ----------------------------------------------------------------- sampling
    def sample(self, storage: Any, batch_size: int) -> tuple[Any, dict[str, Any]]:
        """Draw ``batch_size`` indices proportionally to their priority.

        Returns:
            ``(index, {"priority_weight": weights})``.

        Raises:
            ValueError: if ``batch_size`` is not a positive int.
            RuntimeError: if the storage is empty or every stored priority is zero.
        """
        name = type(self).__name__
        check_batch_size(batch_size, name)
        stored = len(storage)
        check_not_empty(stored, name)
        with self._lock:
            self._cover(stored)
            flat, weight = self._draw(batch_size)
        return unravel(flat, storage), {"priority_weight": weight}

    def _cover(self, stored: int) -> None:
        """Give the default priority to stored elements the sampler was never told about.

        A sampler attached to a storage that was filled before (a loaded checkpoint, a
        storage shared with another buffer) sees elements past the last position it
        ever gave a priority: they get the default priority, as new writes do.
        """
        if stored > self._covered:
            stop = min(stored, self._max_capacity)
            positions = torch.arange(self._covered, stop, device=self._sum_tree.device)
            self._update_trees(positions, self._default_value().expand(positions.numel()))
            self._covered = stop

    def _draw(self, count: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``count`` flat positions drawn by priority, with their importance weights."""
        mass = torch.rand(count, dtype=self.dtype, device=self._sum_tree.device)
        try:
            flat, values = self._sum_tree.sample_leaves(mass.mul_(self._sum_tree.total()))
        except EmptyTreeError:
            raise RuntimeError(
                f"{type(self).__name__} cannot sample: expected a positive total priority, "
                "found 0. Update priorities with positive values or use eps > 0."
            ) from None
        return flat, self._weights(values)

    def _weights(self, values: torch.Tensor) -> torch.Tensor:
        """Importance weights of elements whose tree values are ``values``."""
        return (values / self._min_tree.total()) ** (-self._beta)

    # ----------------------------------------------------------------- state
    def _empty(self) -> None:
        with self._lock:
            self._build_trees(self._sum_tree.device)
            self._covered = 0

    def state_dict(self) -> dict[str, Any]:
        """Return the tree leaves and the running maximum priority."""
        with self._lock:
            return {
                "max_capacity": self._max_capacity,
                "sum_leaves": self._sum_tree.leaves.clone(),
                "min_leaves": self._min_tree.leaves.clone(),
                "max_priority": self._max_priority.clone(),
            } | ({} if self._max_tree is None else {"max_leaves": self._max_tree.leaves.clone()})

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore the trees from :meth:`state_dict`.

        Raises:
            ValueError: if the state was saved with another ``max_capacity``.
        """
        if int(state_dict["max_capacity"]) != self._max_capacity:
            raise ValueError(
                f"{type(self).__name__}.load_state_dict expected a state for "
                f"max_capacity={self._max_capacity}, got max_capacity="
                f"{state_dict['max_capacity']}. Build the sampler with the saved capacity."
            )
        with self._lock:
            device = self._sum_tree.device
            self._build_trees(device)
            as_tree = {"device": device, "dtype": self.dtype}
            self._sum_tree.load_leaves(torch.as_tensor(state_dict["sum_leaves"]).to(**as_tree))
            self._min_tree.load_leaves(torch.as_tensor(state_dict["min_leaves"]).to(**as_tree))
            if self._max_tree is not None:
                self._max_tree.load_leaves(torch.as_tensor(state_dict["max_leaves"]).to(**as_tree))
            self._max_priority = torch.as_tensor(state_dict["max_priority"]).to(
                device=device, dtype=self.dtype
            )
            given = (self._sum_tree.leaves > 0) | (self._min_tree.leaves < torch.inf)
            self._covered = int(given.nonzero().max()) + 1 if bool(given.any()) else 0

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(max_capacity={self._max_capacity}, alpha={self._alpha}, "
            f"beta={self._beta}, eps={self._eps}, reduction={self.reduction!r})"
        )


def _finite_non_negative(priority: torch.Tensor) -> bool:
    low, high = torch.aminmax(priority)
    return bool(low >= 0) and bool(high < torch.inf)


def _reduce_trailing(priority: torch.Tensor, reduction: str) -> torch.Tensor:
    """Reduce ``(N, K)`` priorities to ``(N,)``."""
    if reduction == "median":
        return priority.median(-1).values
    if reduction == "mean":
        return priority.mean(-1)
    if reduction == "sum":
        return priority.sum(-1)
    return priority.amax(-1) if reduction == "max" else priority.amin(-1)


def _rank(values: torch.Tensor) -> torch.Tensor:
    """The rank of each value in ascending order (ties broken by position)."""
    rank = torch.empty_like(values, dtype=torch.long)
    rank[torch.argsort(values, stable=True)] = torch.arange(values.numel(), device=values.device)
    return rank
