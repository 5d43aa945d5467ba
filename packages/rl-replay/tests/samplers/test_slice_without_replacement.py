"""SliceSamplerWithoutReplacement: at most one slice per trajectory and epoch."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_replay import LazyTensorStorage, ReplayBuffer
from rl_replay.samplers import SliceSamplerWithoutReplacement

EPISODES = torch.arange(50) // 10  # five trajectories of 10 steps


def buffer(**kwargs) -> ReplayBuffer:
    sampler = SliceSamplerWithoutReplacement(traj_key="ep", **kwargs)
    rb = ReplayBuffer(storage=LazyTensorStorage(50), sampler=sampler, batch_size=8)
    rb.extend(TensorDict({"ep": EPISODES}, [50]))
    return rb


def episodes_of(rb, index) -> list[int]:
    return EPISODES[index].view(-1, 4)[:, 0].tolist()


class TestSliceSamplerWithoutReplacement:
    def test_each_trajectory_once_per_epoch(self):
        rb = buffer(num_slices=2)
        seen = []
        while not rb._sampler.ran_out:
            index, _ = rb._sampler.sample(rb._storage, 8)
            seen += episodes_of(rb, index)
        assert sorted(seen) == [0, 1, 2, 3, 4]
        assert len(episodes_of(rb, rb._sampler.sample(rb._storage, 8)[0])) == 2  # a new epoch

    def test_drop_last(self):
        rb = buffer(num_slices=2, drop_last=True)
        counts = [rb._sampler.sample(rb._storage, 8)[0].numel() for _ in range(2)]
        assert counts == [8, 8] and rb._sampler.ran_out

    def test_no_shuffle_visits_in_storage_order(self):
        rb = buffer(slice_len=4, shuffle=False)
        assert episodes_of(rb, rb._sampler.sample(rb._storage, 12)[0]) == [0, 1, 2]

    def test_write_starts_new_epoch(self):
        rb = buffer(num_slices=4, shuffle=False)
        rb._sampler.sample(rb._storage, 16)
        rb.extend(TensorDict({"ep": torch.full((5,), 9)}, [5]))
        assert not rb._sampler.ran_out
        assert episodes_of(rb, rb._sampler.sample(rb._storage, 16)[0])[0] in (0, 1)

    @pytest.mark.parametrize("via", ["state_dict", "dumps"])
    def test_round_trip_continues_the_epoch(self, via, tmp_path):
        rb, other = buffer(num_slices=1), buffer(num_slices=1)
        rb._sampler.sample(rb._storage, 4)
        if via == "dumps":
            rb._sampler.dumps(tmp_path)
            other._sampler.loads(tmp_path)
        else:
            other._sampler.load_state_dict(rb._sampler.state_dict())
        torch.manual_seed(0)
        expected = [rb._sampler.sample(rb._storage, 4)[0] for _ in range(4)]
        torch.manual_seed(0)
        found = [other._sampler.sample(other._storage, 4)[0] for _ in range(4)]
        assert all(torch.equal(a, b) for a, b in zip(found, expected))
        assert other._sampler.ran_out
