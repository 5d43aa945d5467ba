"""SliceSampler: which entry marks the trajectories, lazy boundaries and slice-start flags."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_replay import LazyTensorStorage, ListStorage, ReplayBuffer, TensorDictReplayBuffer
from rl_replay.samplers import SliceSampler


def _steps(ids, **extra):
    ids = torch.as_tensor(ids)
    return TensorDict({"obs": torch.arange(ids.numel()).float(), **extra}, [ids.numel()])


def _same_episode(rb, index, ids, seq_len):
    return (torch.as_tensor(ids)[index].view(-1, seq_len).unique(dim=1).shape[1]) == 1


class TestKeyChoice:
    def test_both_keys_given_uses_the_ids_when_the_data_has_them(self):
        ids = [0, 0, 0, 1, 1, 1]
        done = torch.ones(6, 1, dtype=torch.bool)  # would cut every step if it were used
        rb = ReplayBuffer(
            storage=LazyTensorStorage(6),
            sampler=SliceSampler(num_slices=2, traj_key="ep", end_key="done"),
        )
        rb.extend(_steps(ids, ep=torch.tensor(ids), done=done))
        index, _ = rb.sampler.sample(rb.storage, 6)
        assert _same_episode(rb, index, ids, 3)

    def test_both_keys_given_falls_back_to_the_end_flags(self):
        done = torch.tensor([0, 0, 1, 0, 0, 1], dtype=torch.bool).unsqueeze(-1)
        rb = ReplayBuffer(
            storage=LazyTensorStorage(6),
            sampler=SliceSampler(num_slices=2, traj_key="ep", end_key="done"),
        )
        rb.extend(_steps(range(6), done=done))
        index, _ = rb.sampler.sample(rb.storage, 6)
        assert sorted(index.view(2, 3)[:, 0].tolist()) in ([0, 0], [0, 3], [3, 3])

    @pytest.mark.parametrize(
        "present, expected",
        [
            ({("collector", "traj_ids"), "episode"}, ("collector", "traj_ids")),
            ({"episode"}, "episode"),
        ],
    )
    def test_detected_id_entry_is_named_by_traj_key(self, present, expected):
        ids = torch.tensor([0, 0, 0, 1, 1, 1])
        entries = {key: (ids if key == expected else torch.zeros(6)) for key in present}
        rb = TensorDictReplayBuffer(
            storage=LazyTensorStorage(6), sampler=SliceSampler(num_slices=2), batch_size=6
        )
        data = _steps(ids)
        for key, value in entries.items():
            data.set(key, value)
        rb.extend(data)
        assert rb.sampler.traj_key == expected
        sample = rb.sample()
        assert sample.get(expected).view(2, 3).unique(dim=1).shape[1] == 1

    def test_data_without_any_marking_entry_is_refused_before_writing(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(6), sampler=SliceSampler(num_slices=1))
        with pytest.raises(KeyError, match=r"'episode'.*\('next', 'done'\)"):
            rb.extend(_steps(range(3)))
        assert len(rb) == 0


class TestLazyBoundaries:
    def test_rows_written_straight_into_the_storage_are_seen(self):
        ids = torch.tensor([1] * 4 + [2] * 4)
        storage = LazyTensorStorage(8)
        storage.set(range(8), _steps(ids, ep=ids))
        sampler = SliceSampler(num_slices=2, traj_key="ep")  # never told about the writes
        for _ in range(10):
            index, _ = sampler.sample(storage, 8)
            assert _same_episode(None, index, ids, 4)

    def test_rows_set_behind_an_attached_sampler_are_seen(self):
        rb = ReplayBuffer(
            storage=LazyTensorStorage(8), sampler=SliceSampler(num_slices=1, traj_key="ep")
        )
        rb.extend(_steps([0, 0], ep=torch.tensor([0, 0])))
        rb.storage.set(torch.arange(2, 6), _steps([1] * 4, ep=torch.ones(4, dtype=torch.long)))
        starts = {int(rb.sampler.sample(rb.storage, 4)[0][0]) for _ in range(30)}
        assert starts == {2}  # the only 4-step trajectory is the one set directly

    def test_writes_wrapping_many_times_before_a_sample(self):
        rb = ReplayBuffer(
            storage=LazyTensorStorage(10), sampler=SliceSampler(num_slices=1, traj_key="ep")
        )
        for episode in range(7):  # 7 x 4 steps into 10 slots, no sample in between
            rb.extend(_steps([episode] * 4, ep=torch.full((4,), episode)))
        for _ in range(20):
            index, _ = rb.sampler.sample(rb.storage, 4)
            assert rb[index]["ep"].unique().numel() == 1  # never across episodes or the cursor

    def test_list_storage(self):
        rb = ReplayBuffer(storage=ListStorage(6), sampler=SliceSampler(num_slices=2, traj_key="ep"))
        rb.extend([TensorDict({"ep": torch.tensor(i // 3)}, []) for i in range(6)])
        index, _ = rb.sampler.sample(rb.storage, 6)
        assert sorted(index.view(2, 3)[:, 0].tolist()) in ([0, 0], [0, 3], [3, 3])


class TestSliceStarts:
    def test_is_init_is_set_on_the_first_step_of_every_slice(self):
        ids = torch.tensor([0] * 5 + [1] * 5)
        init = torch.zeros(10, 1, dtype=torch.bool)
        init[[0, 5]] = True
        rb = TensorDictReplayBuffer(
            storage=LazyTensorStorage(10),
            sampler=SliceSampler(slice_len=3, traj_key="ep"),
            batch_size=9,
        )
        rb.extend(_steps(ids, ep=ids, is_init=init))
        for _ in range(10):
            sample = rb.sample()
            is_init = sample["is_init"].view(3, 3)
            assert is_init[:, 0].all()
            # inside a slice the stored flags are kept
            assert torch.equal(is_init[:, 1:], init[sample["index"]].view(3, 3)[:, 1:])

    def test_no_is_init_entry_is_invented(self):
        rb = TensorDictReplayBuffer(
            storage=LazyTensorStorage(6),
            sampler=SliceSampler(slice_len=3, traj_key="ep"),
            batch_size=3,
        )
        rb.extend(_steps([0] * 6, ep=torch.zeros(6)))
        assert "is_init" not in rb.sample().keys()
