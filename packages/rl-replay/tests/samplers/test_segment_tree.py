"""SegmentTree against plain-tensor reductions."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_replay.samplers._segment_tree import SegmentTree

REFERENCE = {"sum": torch.sum, "min": torch.min, "max": torch.max}


@st.composite
def updates(draw):
    capacity = draw(st.integers(1, 3000))
    batches = draw(
        st.lists(
            st.lists(
                st.tuples(st.integers(0, capacity - 1), st.integers(0, 50)), min_size=1, max_size=40
            ),
            min_size=1,
            max_size=5,
        )
    )
    return capacity, batches


class TestSegmentTree:
    @pytest.mark.parametrize("op", ["sum", "min", "max"])
    @settings(max_examples=30, deadline=None)
    @given(case=updates())
    def test_total_matches_reduction(self, op, case):
        capacity, batches = case
        tree = SegmentTree(capacity, op=op, dtype=torch.float64)
        leaves = torch.full((capacity,), tree.neutral, dtype=torch.float64)
        for batch in batches:
            index = torch.tensor([i for i, _ in batch])
            value = torch.tensor([float(v) for _, v in batch], dtype=torch.float64)
            # duplicates: both the tree and the reference keep one consistent value per leaf
            unique = {i: v for i, v in batch}
            index = torch.tensor(list(unique))
            value = torch.tensor([float(v) for v in unique.values()], dtype=torch.float64)
            tree.update(index, value)
            leaves[index] = value
            assert float(tree.total()) == float(REFERENCE[op](leaves))
        assert torch.equal(tree.leaves, leaves)

    @settings(max_examples=30, deadline=None)
    @given(
        case=updates(),
        fractions=st.lists(st.floats(0, 1, exclude_max=True), min_size=1, max_size=20),
    )
    def test_find_prefix_sum_matches_searchsorted(self, case, fractions):
        capacity, batches = case
        tree = SegmentTree(capacity, op="sum", dtype=torch.float64)
        for batch in batches:
            unique = dict(batch)
            tree.update(
                torch.tensor(list(unique)),
                torch.tensor([float(v) for v in unique.values()], dtype=torch.float64),
            )
        total = float(tree.total())
        if total == 0:
            return
        mass = torch.tensor(fractions, dtype=torch.float64) * total
        expected = torch.searchsorted(tree.leaves.cumsum(0), mass, right=True)
        found = tree.find_prefix_sum(mass)
        assert torch.equal(found, expected)
        assert bool((tree[found] > 0).all())

    def test_overshooting_mass_lands_on_last_positive_leaf(self):
        tree = SegmentTree(100, op="sum")
        tree.update(torch.tensor([3, 40]), torch.tensor([1.0, 2.0]))
        assert tree.find_prefix_sum(torch.tensor([3.0, 1e6])).tolist() == [40, 40]

    def test_load_leaves_rebuilds_levels(self):
        tree = SegmentTree(50, op="min")
        leaves = torch.rand(50)
        tree.load_leaves(leaves)
        assert float(tree.total()) == float(leaves.min())

    def test_reset_restores_neutral(self):
        tree = SegmentTree(5, op="max")
        tree.update(torch.tensor([1]), torch.tensor([3.0]))
        tree.reset()
        assert float(tree.total()) == -float("inf")

    def test_unknown_op_raises(self):
        with pytest.raises(ValueError, match="expected op in"):
            SegmentTree(5, op="prod")

    def test_branching_keeps_depth_small(self):
        tree = SegmentTree(1_000_000, op="sum")
        assert tree.depth <= 4
        assert math.prod(tree.branches) >= 1_000_000
        assert tree._levels[1].numel() <= 1 << 14  # the search starts right above the leaves
        assert tree._flat == 1


class TestShortcuts:
    """The flat-level search and whole-level recompute agree with the plain descent."""

    @pytest.mark.parametrize("capacity", [40_000, 200_000])
    def test_search_matches_descent_and_searchsorted(self, capacity):
        generator = torch.Generator().manual_seed(capacity)
        tree = SegmentTree(capacity, op="sum", dtype=torch.float64)
        assert tree._flat > 0  # the search starts below the root
        leaves = torch.randint(0, 4, (capacity,), generator=generator).double()  # exact sums
        tree.update(torch.arange(capacity), leaves)
        mass = torch.rand(4096, generator=generator, dtype=torch.float64) * tree.total()
        expected = torch.searchsorted(leaves.cumsum(0), mass, right=True)
        assert torch.equal(tree._search(mass), expected)
        assert torch.equal(tree._descend(mass, guarded=False), expected)
        assert torch.equal(tree.find_prefix_sum(mass), expected)

    def test_float32_search_lands_on_positive_leaves(self):
        tree = SegmentTree(1_000_000, op="sum")
        index = torch.randperm(1_000_000)[:50_000]
        tree.update(index, torch.rand(50_000) + 0.01)  # most leaves stay zero
        found = tree.find_prefix_sum(torch.rand(10_000) * tree.total())
        assert bool((tree[found] > 0).all())

    @pytest.mark.parametrize("op", ["sum", "min", "max"])
    def test_whole_level_recompute_matches_gathered_update(self, op):
        capacity = 50_000
        values = torch.randint(0, 100, (capacity,)).double()
        big, small = (SegmentTree(capacity, op=op, dtype=torch.float64) for _ in range(2))
        index = torch.randperm(capacity)[:5_000]
        big.update(index, values[index])  # 5000 updates: upper levels recomputed whole
        for part in index.split(7):  # 7 updates: every level but the root gathered
            assert len(small.ancestors(part)) == small.depth - 1
            small.update(part, values[part])
        assert len(big.ancestors(index)) < small.depth - 1
        for mine, theirs in zip(big._levels, small._levels, strict=True):
            assert torch.equal(mine, theirs)
