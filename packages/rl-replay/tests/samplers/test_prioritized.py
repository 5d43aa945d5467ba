"""PrioritizedSampler against a reference proportional sampler."""

from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tensordict import TensorDict

from rl_replay import LazyTensorStorage, ReplayBuffer
from rl_replay.checkpointers._files import rewrite_json
from rl_replay.samplers import PrioritizedSampler


class Sized:
    """The part of the storage contract a PrioritizedSampler reads."""

    ndim = 1

    def __init__(self, length: int) -> None:
        self.length = length

    def __len__(self) -> int:
        return self.length


def reference(priority: torch.Tensor, alpha: float, beta: float, eps: float):
    """Probabilities and importance weights, straight from the definitions (float64)."""
    value = (priority.double() + eps) ** alpha
    prob = value / value.sum()
    n = priority.numel()
    weight = (n * prob) ** -beta
    return prob, weight / weight[prob > 0].max()


def filled(priority: torch.Tensor, **kwargs) -> PrioritizedSampler:
    sampler = PrioritizedSampler(priority.numel(), **kwargs)
    sampler.extend(torch.arange(priority.numel()))
    sampler.update_priority(torch.arange(priority.numel()), priority)
    return sampler


class TestPrioritizedSampler:
    @settings(max_examples=20, deadline=None)
    @given(
        priority=st.lists(  # zero or well away from float underflow
            st.one_of(st.just(0.0), st.floats(1e-3, 10)), min_size=1, max_size=40
        ).filter(lambda p: sum(p) > 0),
        alpha=st.sampled_from([0.0, 0.5, 1.0, 2.0]),
        beta=st.sampled_from([0.0, 0.4, 1.0]),
    )
    def test_frequencies_and_weights_match_reference(self, priority, alpha, beta):
        priority = torch.tensor(priority, dtype=torch.float64)
        sampler = filled(priority, alpha=alpha, beta=beta, eps=0.0, dtype=torch.float64)
        draws = 50_000
        index, info = sampler.sample(Sized(priority.numel()), draws)
        prob, weight = reference(priority, alpha, beta, 0.0)
        freq = torch.bincount(index, minlength=priority.numel()).double() / draws
        sigma = (prob * (1 - prob) / draws).sqrt()
        assert bool(((freq - prob).abs() <= 6 * sigma + 1e-12).all())
        assert bool((freq[prob == 0] == 0).all())
        torch.testing.assert_close(info["priority_weight"], weight[index], rtol=1e-9, atol=0)

    def test_eps_is_added_before_alpha(self):
        sampler = filled(
            torch.tensor([0.0, 1.0]), alpha=0.5, beta=1.0, eps=0.25, dtype=torch.float64
        )
        index, info = sampler.sample(Sized(2), 1000)
        _, weight = reference(torch.tensor([0.0, 1.0]), 0.5, 1.0, 0.25)
        torch.testing.assert_close(info["priority_weight"], weight[index])

    def test_new_elements_get_largest_priority_seen(self):
        sampler = PrioritizedSampler(4, alpha=1.0, beta=1.0, eps=0.0)
        sampler.extend(torch.arange(2))
        sampler.update_priority(torch.arange(2), torch.tensor([5.0, 0.5]))
        sampler.update_priority(torch.tensor([0]), 0.1)
        sampler.extend(torch.tensor([2]))
        assert sampler._sum_tree[torch.tensor([2])].item() == pytest.approx(5.0)
        assert sampler.default_priority == pytest.approx(5.0)

    def test_max_priority_within_buffer_forgets_overwritten(self):
        sampler = PrioritizedSampler(
            4, alpha=1.0, beta=1.0, eps=0.0, max_priority_within_buffer=True
        )
        sampler.extend(torch.arange(2))
        sampler.update_priority(torch.arange(2), torch.tensor([5.0, 0.5]))
        sampler.update_priority(torch.tensor([0]), 0.1)
        assert sampler.default_priority == pytest.approx(0.5)

    def test_default_priority_before_any_update(self):
        assert PrioritizedSampler(3, alpha=0.5, beta=1.0).default_priority == pytest.approx(1.0)

    @pytest.mark.parametrize(
        "priority, match",
        [
            (
                torch.tensor([1.0, -1.0, 1.0]),
                r"finite, non-negative priorities, got \[-1.0\] at positions \[1\]",
            ),
            (
                torch.tensor([1.0, float("nan"), 1.0]),
                r"finite, non-negative priorities, got \[nan\]",
            ),
            (
                torch.tensor([1.0, float("inf"), 1.0]),
                r"finite, non-negative priorities, got \[inf\] at positions \[1\]",
            ),
            (
                torch.tensor([1.0, 2.0]),
                r"one priority per index \(3 values\) or a scalar, got a priority of shape \(2,\)",
            ),
        ],
    )
    def test_bad_priority_raises(self, priority, match):
        sampler = filled(torch.ones(3), alpha=1.0, beta=1.0)
        with pytest.raises(ValueError, match=match):
            sampler.update_priority(torch.arange(3), priority)

    def test_alpha_setter_re_expresses_stored_priorities(self):
        sampler = filled(torch.tensor([1.0, 2.0, 4.0]), alpha=1.0, beta=1.0, eps=0.0)
        sampler.alpha = 0.5
        assert sampler.alpha == 0.5
        torch.testing.assert_close(sampler._sum_tree.leaves, torch.tensor([1.0, 2.0, 4.0]) ** 0.5)
        fresh = filled(torch.tensor([1.0, 2.0, 4.0]), alpha=0.5, beta=1.0, eps=0.0)
        torch.testing.assert_close(sampler._sum_tree.total(), fresh._sum_tree.total())
        torch.testing.assert_close(sampler._min_tree.total(), fresh._min_tree.total())

    def test_alpha_setter_refuses_negative_values(self):
        sampler = filled(torch.ones(2), alpha=0.7, beta=1.0)
        with pytest.raises(
            ValueError, match=r"alpha must be greater or equal to 0, got alpha=-1\.0"
        ):
            sampler.alpha = -1.0
        assert sampler.alpha == 0.7

    def test_out_of_range_index_raises_before_any_change(self):
        sampler = PrioritizedSampler(3, alpha=1.0, beta=1.0)
        with pytest.raises(ValueError, match=r"indices in \[0, max_capacity=3\), got \[5\]"):
            sampler.update_priority(torch.tensor([0, 5]), 9.0)
        assert sampler.default_priority == pytest.approx(1.0)
        assert float(sampler._sum_tree.total()) == 0.0

    @pytest.mark.parametrize(
        "reduction, expected",
        [("max", 3.0), ("min", 1.0), ("mean", 2.0), ("median", 2.0), ("sum", 6.0)],
    )
    def test_reduction_of_trailing_dims_and_duplicates(self, reduction, expected):
        sampler = PrioritizedSampler(4, alpha=1.0, beta=1.0, eps=0.0, reduction=reduction)
        sampler.extend(torch.arange(4))
        sampler.update_priority(torch.tensor([0]), torch.tensor([[1.0, 3.0, 2.0]]))
        sampler.update_priority(torch.tensor([1, 1, 1]), torch.tensor([1.0, 3.0, 2.0]))
        assert sampler._sum_tree[torch.tensor([0, 1])].tolist() == pytest.approx(
            [expected, expected]
        )

    @pytest.mark.parametrize(
        "kwargs, match",
        [
            ({"max_capacity": 0}, "max_capacity to be a positive int"),
            ({"alpha": -1.0}, "alpha >= 0"),
            ({"beta": float("nan")}, "beta >= 0"),
            ({"reduction": "prod"}, "reduction in"),
        ],
    )
    def test_bad_arguments_raise(self, kwargs, match):
        args = {"max_capacity": 4, "alpha": 1.0, "beta": 1.0} | kwargs
        with pytest.raises(ValueError, match=match):
            PrioritizedSampler(**args)

    def test_zero_total_priority_raises(self):
        sampler = filled(torch.zeros(3), alpha=1.0, beta=1.0, eps=0.0)
        with pytest.raises(RuntimeError, match="expected a positive total priority"):
            sampler.sample(Sized(3), 2)

    def test_empty_storage_raises(self):
        with pytest.raises(RuntimeError, match="empty storage"):
            PrioritizedSampler(3, alpha=1.0, beta=1.0).sample(Sized(0), 2)

    def test_mark_update_resets_to_default(self):
        sampler = filled(torch.tensor([1.0, 9.0]), alpha=1.0, beta=1.0, eps=0.0)
        sampler.update_priority(torch.tensor([1]), 0.5)
        sampler.mark_update(torch.tensor([0]))
        assert sampler._sum_tree[torch.tensor([0])].item() == pytest.approx(9.0)

    def test_empty_resets_trees(self):
        sampler = filled(torch.tensor([1.0, 9.0]), alpha=1.0, beta=1.0)
        sampler._empty()
        assert float(sampler._sum_tree.total()) == 0.0
        assert sampler.default_priority == pytest.approx(1.0)

    @pytest.mark.parametrize("stacked", [False, True])
    def test_multidim_storage_index(self, stacked):
        rb = ReplayBuffer(
            storage=LazyTensorStorage(12, ndim=2),
            sampler=PrioritizedSampler(12, alpha=1.0, beta=1.0, eps=0.0),
        )
        rb.extend(TensorDict({"x": torch.arange(12).view(2, 6)}, [2, 6]))  # storage [6, 2]
        sampler = rb._sampler
        rows, cols = sampler.sample(rb._storage, 5)[0]
        assert rows.max() < 6 and cols.max() < 2
        target = (torch.tensor([0, 1, 2]), torch.tensor([1, 0, 1]))
        index = torch.stack(target, -1) if stacked else target
        sampler.update_priority(
            (torch.arange(6).repeat_interleave(2), torch.arange(2).repeat(6)), 0.0
        )
        sampler.update_priority(index, torch.tensor([1.0, 2.0, 3.0]))
        rows, cols = sampler.sample(rb._storage, 2000)[0]
        assert set(zip(rows.tolist(), cols.tolist())) == {(0, 1), (1, 0), (2, 1)}

    def test_buffer_extend_gives_written_rows_default_priority(self):
        rb = ReplayBuffer(
            storage=LazyTensorStorage(8, ndim=2), sampler=PrioritizedSampler(8, alpha=1.0, beta=1.0)
        )
        rb.extend(TensorDict({"x": torch.zeros(2, 3)}, [2, 3]))
        assert int((rb._sampler._sum_tree.leaves > 0).sum()) == 6

    @pytest.mark.parametrize("via", ["state_dict", "dumps"])
    def test_round_trip_gives_same_samples(self, via, tmp_path):
        sampler = filled(torch.rand(100), alpha=0.7, beta=0.5, max_priority_within_buffer=True)
        other = PrioritizedSampler(100, alpha=0.7, beta=0.5, max_priority_within_buffer=True)
        if via == "dumps":
            sampler.dumps(tmp_path / "s")
            other.loads(tmp_path / "s")
        else:
            other.load_state_dict(sampler.state_dict())
        torch.manual_seed(1)
        expected = sampler.sample(Sized(100), 64)
        torch.manual_seed(1)
        found = other.sample(Sized(100), 64)
        assert torch.equal(found[0], expected[0])
        assert torch.equal(found[1]["priority_weight"], expected[1]["priority_weight"])
        assert other.default_priority == sampler.default_priority

    def test_load_state_with_other_capacity_raises(self):
        state = PrioritizedSampler(5, alpha=1.0, beta=1.0).state_dict()
        with pytest.raises(ValueError, match="max_capacity=6, got max_capacity=5"):
            PrioritizedSampler(6, alpha=1.0, beta=1.0).load_state_dict(state)

    def test_loads_errors_name_the_file(self, tmp_path):
        sampler = filled(torch.rand(4), alpha=1.0, beta=1.0)
        with pytest.raises(FileNotFoundError, match=r"sampler_meta\.json"):
            sampler.loads(tmp_path / "missing")
        sampler.dumps(tmp_path / "s")
        meta = tmp_path / "s" / "sampler_meta.json"
        content = json.loads(meta.read_text())
        rewrite_json(meta, content | {"class": "RandomSampler"})
        with pytest.raises(ValueError, match="found one written by RandomSampler"):
            sampler.loads(tmp_path / "s")
        meta.write_text(json.dumps(content)[:20])
        with pytest.raises(ValueError, match="truncated or corrupt"):
            sampler.loads(tmp_path / "s")
        meta.write_text(json.dumps(content))
        for file in (tmp_path / "s" / "tensors").rglob("*"):
            if file.is_file():
                file.unlink()
        with pytest.raises((ValueError, FileNotFoundError), match="tensors"):
            sampler.loads(tmp_path / "s")

    def test_concurrent_sample_and_update_keep_trees_consistent(self, concurrently):
        capacity = 5000
        sampler = filled(torch.rand(capacity) + 0.1, alpha=0.6, beta=0.4, dtype=torch.float64)

        def write():
            for _ in range(200):
                index = torch.randint(capacity, (64,))
                sampler.update_priority(index, torch.rand(64) + 0.1)
                sampler.extend(torch.randint(capacity, (8,)))

        def read():
            index, info = sampler.sample(Sized(capacity), 64)
            assert bool(((index >= 0) & (index < capacity)).all())
            assert bool((info["priority_weight"] <= 1 + 1e-9).all())

        assert concurrently(write, read) == []
        leaves = sampler._sum_tree.leaves
        assert float(sampler._sum_tree.total()) == pytest.approx(float(leaves.sum()), rel=1e-12)
        assert float(sampler._min_tree.total()) == float(leaves.min())

    @pytest.mark.cuda
    @pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
    def test_cuda_storage_moves_trees(self):
        storage = LazyTensorStorage(10, device="cuda")
        rb = ReplayBuffer(storage=storage, sampler=PrioritizedSampler(10, alpha=1.0, beta=1.0))
        rb.extend(TensorDict({"x": torch.arange(10)}, [10]))
        index, _ = rb._sampler.sample(storage, 4)
        assert index.device.type == "cuda"
        rb.update_priority(index, torch.rand(4, device="cuda"))
        assert rb._sampler._sum_tree.device.type == "cuda"


class TestStorageFilledElsewhere:
    def test_elements_written_through_another_buffer_get_the_default_priority(self):
        from rl_replay import LazyTensorStorage, RandomSampler, ReplayBuffer, RoundRobinWriter

        storage, writer = LazyTensorStorage(10), RoundRobinWriter()
        ReplayBuffer(storage=storage, writer=writer, sampler=RandomSampler()).extend(
            torch.arange(6)
        )
        rb = ReplayBuffer(
            storage=storage, writer=writer, sampler=PrioritizedSampler(10, alpha=0.7, beta=1.0)
        )
        torch.manual_seed(0)
        assert sorted(rb.sample(200).unique().tolist()) == [0, 1, 2, 3, 4, 5]
