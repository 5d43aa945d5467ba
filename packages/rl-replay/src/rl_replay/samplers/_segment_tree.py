"""A vectorised segment tree (sum, min or max) over torch tensors.

The tree is B-ary rather than binary: with ``B <= 128`` per level, chosen so that the
depth is at most 4 up to four million leaves, a batch update recomputes each level with
one gather + reduce + scatter, and a batch prefix-sum search descends all samples at
once with one gather + cumsum per level. That keeps the number of torch calls per
``update`` / ``find_prefix_sum`` at a few dozen whatever the capacity, and the work per
call at ``O(batch * B * depth)``. Duplicate indices in one update are harmless: parents
are recomputed from their children, never patched with deltas, so no rounding drift
accumulates either.

Trees above ``FLAT_LEVEL`` leaves first group the leaves by a small power of two (64
for one million leaves), so that the level above the leaves is small enough for the
search shortcut below and a draw reads one short run of leaves.

Two shortcuts cut the calls further where a level is small. An update whose batch
touches at least as many parents as a level holds recomputes that whole level with one
reduce (cheaper than gathering a child row per update). A search starts from the lowest
level of at most ``FLAT_LEVEL`` nodes: one float64 cumsum over that level and one
``searchsorted`` replace the descent through every level above it.
"""

from __future__ import annotations

import math

import torch

__all__ = ["EmptyTreeError", "SegmentTree"]


def _sum(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    return torch.sum(x, -1, out=out)


def _min(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    return torch.amin(x, -1, out=out)


def _max(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    return torch.amax(x, -1, out=out)


# op -> (reduction over the last dim, neutral element); plain functions so trees pickle
_REDUCE = {"sum": (_sum, 0.0), "min": (_min, math.inf), "max": (_max, -math.inf)}
_MAX_BRANCH = 128
# large trees group their leaves so that the level above them has at most this many
# nodes: a search is then one cumsum over that level plus one gather + cumsum at the leaves
_ABOVE_LEAVES = 1 << 14
# a search starts with one cumsum over the lowest level of at most this many nodes: a
# 10k-node cumsum costs about what one gather + cumsum descent step over 256 draws does
FLAT_LEVEL = 1 << 15


class EmptyTreeError(RuntimeError):
    """Raised when sampling a sum tree whose leaves are all zero."""


class SegmentTree:
    """A fixed-capacity tree of ``op``-reductions over its leaves.

    Args:
        capacity (int): number of leaves.
        op (str): ``"sum"``, ``"min"`` or ``"max"``.
        dtype (torch.dtype, optional): the value dtype. Defaults to ``torch.float``.
        device (torch.device, optional): where the tree lives. Defaults to CPU.

    Examples:
        >>> import torch
        >>> tree = SegmentTree(10, op="sum")
        >>> tree.update(torch.tensor([0, 3, 9]), torch.tensor([1.0, 2.0, 3.0]))
        >>> float(tree.total())
        6.0
        >>> tree.find_prefix_sum(torch.tensor([0.5, 1.5, 5.9]))
        tensor([0, 3, 9])
    """

    def __init__(
        self,
        capacity: int,
        *,
        op: str,
        dtype: torch.dtype = torch.float,
        device: torch.device | str | None = None,
    ) -> None:
        if op not in _REDUCE:
            raise ValueError(f"SegmentTree expected op in {sorted(_REDUCE)}, got {op!r}.")
        self.capacity = int(capacity)
        self.op = op
        self._reduce, self.neutral = _REDUCE[op]
        # branches[k]: children per node of level k + 1 (level 0 holds the leaves)
        self.branches = _branches(max(self.capacity, 2))
        self.depth = depth = len(self.branches)
        sizes = [math.prod(self.branches[k:]) for k in range(depth + 1)]
        self._levels = [
            torch.full((size,), self.neutral, dtype=dtype, device=device) for size in sizes
        ]
        self._flat = min(k for k in range(depth + 1) if self._levels[k].numel() <= FLAT_LEVEL)

    @property
    def device(self) -> torch.device:
        """The device the tree lives on."""
        return self._levels[0].device

    @property
    def leaves(self) -> torch.Tensor:
        """The ``capacity`` leaf values (a view)."""
        return self._levels[0][: self.capacity]

    def to(self, device: torch.device) -> SegmentTree:
        """Move the tree to ``device`` in place and return it."""
        self._levels = [level.to(device) for level in self._levels]
        return self

    def total(self) -> torch.Tensor:
        """The reduction over every leaf (a 0-d tensor)."""
        return self._levels[-1][0]

    def __getitem__(self, index: torch.Tensor) -> torch.Tensor:
        return self._levels[0][index]

    def ancestors(self, index: torch.Tensor) -> list[torch.Tensor]:
        """The nodes above ``index`` at each level that :meth:`update` gathers for.

        Shareable by same-capacity trees. Levels where a batch of this size touches at
        least as many parents as the level holds are left out: :meth:`update` recomputes
        them whole.
        """
        nodes, node = [], index
        for k in range(1, self.depth + 1):
            if self._levels[k].numel() <= index.numel():
                break
            node = node // self.branches[k - 1]
            nodes.append(node)
        return nodes

    def update(
        self,
        index: torch.Tensor,
        value: torch.Tensor | float,
        ancestors: list[torch.Tensor] | None = None,
    ) -> None:
        """Set the leaves at ``index`` to ``value`` and refresh their ancestors."""
        levels = self._levels
        if not isinstance(value, torch.Tensor) or value.shape != index.shape:
            value = torch.as_tensor(value, dtype=levels[0].dtype, device=index.device)
            value = value.expand(index.shape)
        levels[0].index_copy_(0, index, value.to(levels[0].dtype))
        nodes = self.ancestors(index) if ancestors is None else ancestors
        for k in range(1, self.depth + 1):
            children = levels[k - 1].view(-1, self.branches[k - 1])
            if k <= len(nodes):
                node = nodes[k - 1]
                levels[k].index_copy_(0, node, self._reduce(children.index_select(0, node)))
            else:  # a small level: recomputing every parent beats one gather per update
                self._reduce(children, out=levels[k])

    def reset(self) -> None:
        """Set every leaf back to the neutral value."""
        for level in self._levels:
            level.fill_(self.neutral)

    def load_leaves(self, leaves: torch.Tensor) -> None:
        """Replace all leaves by ``leaves`` (``capacity`` values) and rebuild the tree."""
        self._levels[0].fill_(self.neutral)
        self._levels[0][: self.capacity] = leaves.to(self._levels[0])
        for k in range(1, self.depth + 1):
            self._levels[k] = self._reduce(self._levels[k - 1].view(-1, self.branches[k - 1]))

    def find_prefix_sum(self, mass: torch.Tensor) -> torch.Tensor:
        """For each ``m`` in ``mass``, the first leaf whose inclusive prefix sum exceeds ``m``.

        Only for ``op="sum"`` trees with non-negative leaves; see :meth:`sample_leaves`.
        """
        return self.sample_leaves(mass)[0]

    def sample_leaves(self, mass: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`find_prefix_sum` plus the values of the leaves found.

        Leaves of value 0 are never returned as long as ``total() > 0``: the few draws that
        rounding pushes past the last positive leaf of a node are redone with a descent
        clamped to positive children.
        """
        found = self._search(mass)
        values = self._levels[0].index_select(0, found)
        zero = values <= 0
        if bool(zero.any()):
            if not bool(self.total() > 0):
                raise EmptyTreeError("the tree holds no positive leaf")
            found[zero] = self._descend(mass[zero], guarded=True)
            values = self._levels[0].index_select(0, found)
        return found, values

    def _search(self, mass: torch.Tensor) -> torch.Tensor:
        """Unguarded search: one cumsum over the lowest small level, then a local descent."""
        top = self._levels[self._flat]
        prefix = top.cumsum(0, dtype=torch.float64)
        wide = mass.to(torch.float64)
        node = torch.searchsorted(prefix, wide, right=True).clamp_(max=top.numel() - 1)
        if self._flat == 0:
            return node
        below = prefix.index_select(0, node) - top.index_select(0, node)  # exclusive prefix
        return self._descend(
            (wide - below).to(top.dtype), guarded=False, node=node, start=self._flat - 1
        )

    def _descend(
        self,
        mass: torch.Tensor,
        *,
        guarded: bool,
        node: torch.Tensor | None = None,
        start: int | None = None,
    ) -> torch.Tensor:
        """Descend from the nodes ``node`` of level ``start + 1`` (default: the root) to leaves."""
        if node is None:
            node = torch.zeros(mass.shape, dtype=torch.long, device=mass.device)
        mass = mass.to(self._levels[0].dtype).unsqueeze(-1)
        for k in range(self.depth - 1 if start is None else start, -1, -1):
            branch = self.branches[k]
            children = self._levels[k].view(-1, branch).index_select(0, node)
            cumsum = children.cumsum(-1)
            choice = torch.searchsorted(cumsum, mass, right=True)
            if guarded:  # the first child reaching the node total is its last positive one
                last = torch.searchsorted(cumsum, cumsum[:, -1:].contiguous())
                choice = torch.minimum(choice, last)
            else:
                choice = choice.clamp_(max=branch - 1)
            mass = mass - (cumsum - children).gather(-1, choice)
            node = node.mul_(branch).add_(choice.view(-1))
        return node


def _branches(size: int) -> list[int]:
    """Per-level branching factors covering ``size`` leaves (bottom level first).

    Up to ``FLAT_LEVEL`` leaves: ``B <= 128`` children at every level. Larger trees
    group the leaves by the smallest power of two (up to 128) that leaves at most
    ``_ABOVE_LEAVES`` groups, and cover the groups the same way.
    """
    if size > FLAT_LEVEL:
        leaf = 2
        while leaf < _MAX_BRANCH and -(-size // leaf) > _ABOVE_LEAVES:
            leaf *= 2
        return [leaf, *_branches(-(-size // leaf))]
    depth = max(1, math.ceil(math.log(size) / math.log(_MAX_BRANCH) - 1e-9))
    branch = max(2, math.ceil(size ** (1 / depth) - 1e-9))
    while branch**depth < size:
        branch += 1
    return [branch] * depth
