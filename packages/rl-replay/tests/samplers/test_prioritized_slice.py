"""PrioritizedSliceSampler: slice starts drawn by priority among the valid starts."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_replay import LazyTensorStorage, ReplayBuffer
from rl_replay.samplers import PrioritizedSliceSampler


def buffer(capacity: int = 40, ndim: int = 1, **kwargs) -> ReplayBuffer:
    args = {"alpha": 1.0, "beta": 1.0, "eps": 0.0, "slice_len": 4, "traj_key": "ep"} | kwargs
    return ReplayBuffer(
        storage=LazyTensorStorage(capacity, ndim=ndim),
        sampler=PrioritizedSliceSampler(capacity, **args),
    )


class TestPrioritizedSliceSampler:
    def test_start_frequencies_follow_priorities_of_valid_starts(self):
        rb = buffer()
        rb.extend(TensorDict({"ep": torch.arange(40) // 10}, [40]))
        priority = torch.rand(40) + 0.05
        rb._sampler.update_priority(torch.arange(40), priority)
        valid = (torch.arange(40) % 10) <= 6  # slices of 4 inside trajectories of 10
        prob = torch.where(valid, priority, 0).double()
        prob = prob / prob.sum()
        draws = 40_000
        index, info = rb._sampler.sample(rb._storage, 4 * draws)
        starts = index.view(-1, 4)[:, 0]
        assert bool((index.view(-1, 4).diff(dim=1) == 1).all())
        freq = torch.bincount(starts, minlength=40).double() / draws
        sigma = (prob * (1 - prob) / draws).sqrt()
        assert bool(((freq - prob).abs() <= 6 * sigma + 1e-12).all())
        leaves = priority.double()
        weight = (leaves[starts] / leaves.min()) ** -1.0
        torch.testing.assert_close(
            info["priority_weight"].view(-1, 4)[:, 0].double(), weight, rtol=1e-5, atol=0
        )
        assert bool((info["priority_weight"].view(-1, 4).diff(dim=1) == 0).all())

    def test_exact_fallback_when_valid_mass_is_tiny(self):
        rb = buffer()
        rb.extend(TensorDict({"ep": torch.arange(40) // 10}, [40]))
        # invalid starts (the last 3 steps of each trajectory) hold almost all the mass,
        # so rejection gives up and the exact draw over valid starts takes over
        priority = torch.where((torch.arange(40) % 10) <= 6, 0.0, 1e6)
        priority[[2, 13]] = 1.0
        rb._sampler.update_priority(torch.arange(40), priority)
        starts = rb._sampler.sample(rb._storage, 40)[0].view(-1, 4)[:, 0]
        assert set(starts.tolist()) <= {2, 13}

    def test_no_valid_start_with_priority_raises(self):
        rb = buffer()
        rb.extend(TensorDict({"ep": torch.arange(40) // 10}, [40]))
        priority = torch.where((torch.arange(40) % 10) <= 6, 0.0, 1.0)
        rb._sampler.update_priority(torch.arange(40), priority)
        with pytest.raises(
            RuntimeError, match="positive priority on at least one valid slice start"
        ):
            rb._sampler.sample(rb._storage, 8)

    def test_update_priority_sets_every_slice_element(self):
        rb = buffer()
        rb.extend(TensorDict({"ep": torch.arange(40) // 10}, [40]))
        index, _ = rb._sampler.sample(rb._storage, 8)
        rb._sampler.update_priority(index, 7.0)
        assert bool((rb._sampler._sum_tree[index] == 7.0).all())

    def test_multidim_storage(self):
        rb = buffer(capacity=40, ndim=2)
        rb.extend(
            TensorDict(
                {"ep": torch.stack([torch.arange(20) // 10, torch.arange(20) // 5])}, [2, 20]
            )
        )
        rows, cols = rb._sampler.sample(rb._storage, 400)[0]
        rows, cols = rows.view(-1, 4), cols.view(-1, 4)
        assert bool((cols.diff(dim=1) == 0).all()) and bool((rows.diff(dim=1) == 1).all())
        starts = set(zip(rows[:, 0].tolist(), cols[:, 0].tolist()))
        assert starts <= {(r, 0) for r in range(20) if r % 10 <= 6} | {
            (r, 1) for r in range(20) if r % 5 <= 1
        }

    def test_loose_slices_cover_short_trajectories(self):
        rb = buffer(strict_length=False)
        rb.extend(TensorDict({"ep": torch.tensor([0, 0, 1, 1, 1, 1, 1, 1])}, [8]))
        rb._sampler.update_priority(torch.arange(8), torch.tensor([1.0, 0, 0, 0, 0, 0, 0, 0]))
        index, info = rb._sampler.sample(rb._storage, 8)
        assert index.tolist() == [0, 1, 0, 1]
        assert info["priority_weight"].shape == (4,)

    @pytest.mark.parametrize("via", ["state_dict", "dumps"])
    def test_round_trip_gives_same_samples(self, via, tmp_path):
        data = TensorDict({"ep": torch.arange(40) // 8}, [40])
        rb, other = buffer(), buffer()
        rb.extend(data)
        other.extend(data)
        rb._sampler.update_priority(torch.arange(40), torch.rand(40))
        if via == "dumps":
            rb._sampler.dumps(tmp_path)
            other._sampler.loads(tmp_path)
        else:
            other._sampler.load_state_dict(rb._sampler.state_dict())
        torch.manual_seed(2)
        expected = rb._sampler.sample(rb._storage, 12)
        torch.manual_seed(2)
        found = other._sampler.sample(other._storage, 12)
        assert torch.equal(found[0], expected[0])
        assert torch.equal(found[1]["priority_weight"], expected[1]["priority_weight"])
