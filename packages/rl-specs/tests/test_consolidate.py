"""consolidate_spec, check_no_exclusive_keys and contains_lazy_spec."""

from __future__ import annotations

import torch

from rl_specs import (
    Bounded,
    Composite,
    OneHot,
    StackedComposite,
    Unbounded,
    check_no_exclusive_keys,
    consolidate_spec,
    contains_lazy_spec,
)


def stacked_with_exclusive() -> StackedComposite:
    return torch.stack(
        [
            Composite(
                obs=Unbounded(shape=(3,)),
                extra=Unbounded(shape=(2, 2)),
                act=OneHot(4),
                info=Composite(x=Unbounded(shape=(1,))),
            ),
            Composite(obs=Unbounded(shape=(3,)), bounded=Bounded(0, 1, shape=(5,))),
        ]
    )


class TestConsolidateSpec:
    def test_adds_empty_entries_for_exclusive_keys(self):
        spec = stacked_with_exclusive()
        fixed = consolidate_spec(spec)
        assert check_no_exclusive_keys(fixed)
        assert fixed[1]["extra"].shape == (0, 0)
        assert fixed[1]["act"].shape == (4,)  # the one-hot dim is kept
        assert fixed[1]["info", "x"].shape == (0,)
        assert fixed[0]["bounded"].shape == (0,)
        assert fixed["extra"].shape == (2, -1, -1)
        assert not check_no_exclusive_keys(spec)  # the input is left as it was

    def test_recurses_through_entries(self):
        parent = Composite(agents=stacked_with_exclusive(), other=Unbounded(shape=(1,)))
        assert not check_no_exclusive_keys(parent)
        fixed = consolidate_spec(parent)
        assert check_no_exclusive_keys(fixed)
        assert not check_no_exclusive_keys(consolidate_spec(parent, recurse_through_entries=False))

    def test_recurses_through_stack(self):
        inner = stacked_with_exclusive()
        outer = torch.stack(
            [Composite(agents=inner, a=Unbounded()), Composite(agents=inner.clone())]
        )
        assert not check_no_exclusive_keys(outer)
        assert check_no_exclusive_keys(consolidate_spec(outer))
        shallow = consolidate_spec(
            outer, recurse_through_entries=False, recurse_through_stack=False
        )
        assert check_no_exclusive_keys(shallow, recurse=False)
        assert not check_no_exclusive_keys(shallow)

    def test_placeholders_keep_batch_dims_and_agreed_sizes(self):
        lazy = torch.stack([Unbounded(shape=(2, 5, n, 7)) for n in (6, 7, 8)], dim=1)
        spec = torch.stack(
            [
                Composite(lazy=lazy, same=Unbounded(shape=(2, 5, 5)), shape=(2,)),
                Composite(same=Unbounded(shape=(2, 5, 5)), shape=(2,)),
                Composite(shape=(2,), device="cpu"),
            ]
        )
        fixed = consolidate_spec(spec)
        assert fixed[2]["same"].shape == (2, 0, 0)  # the batch dim stays
        assert fixed["same"].shape == (3, 2, -1, -1)
        assert fixed[1]["lazy"].shape == (2, 3, 5, 0, 7)  # only the ragged dim is emptied
        assert fixed["lazy"].shape == (3, 2, 3, 5, -1, 7)
        assert check_no_exclusive_keys(fixed)

    def test_non_composite_returned_as_clone(self):
        spec = Unbounded(shape=(2,))
        out = consolidate_spec(spec)
        assert out == spec and out is not spec


class TestCheckNoExclusiveKeys:
    def test_values(self):
        assert check_no_exclusive_keys(Composite(a=Unbounded()))
        assert check_no_exclusive_keys(Unbounded())
        assert not check_no_exclusive_keys(stacked_with_exclusive())

    def test_recurse_flag(self):
        parent = Composite(agents=stacked_with_exclusive())
        assert check_no_exclusive_keys(parent, recurse=False)
        assert not check_no_exclusive_keys(parent, recurse=True)


class TestContainsLazySpec:
    def test_values(self):
        lazy = torch.stack([Unbounded(shape=(2,)), Unbounded(shape=(3,))])
        assert contains_lazy_spec(lazy)
        assert contains_lazy_spec(Composite(a=Composite(b=lazy, shape=(2,)), shape=(2,)))
        assert contains_lazy_spec(stacked_with_exclusive())
        assert not contains_lazy_spec(Composite(a=Unbounded()))
        assert not contains_lazy_spec(Unbounded())
        assert not contains_lazy_spec(Composite(a=None))
