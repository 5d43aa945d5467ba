"""Slot generations (``track_generations``) and conditional updates (``update_if_present``)."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_replay import (
    LazyMemmapStorage,
    LazyTensorStorage,
    ListStorage,
    ReplayBuffer,
    RoundRobinWriter,
    TensorDictReplayBuffer,
    TensorDictRoundRobinWriter,
)


def _tracked(capacity=6, storage=None):
    return TensorDictReplayBuffer(
        storage=storage if storage is not None else LazyTensorStorage(capacity),
        writer=TensorDictRoundRobinWriter(track_generations=True),
        batch_size=3,
    )


def _rows(count, start=0.0):
    values = torch.arange(count, dtype=torch.float32) + start
    return TensorDict({"x": values, "v": torch.zeros(count, dtype=torch.int64)}, [count])


class TestGenerations:
    def test_untracked_writer_reports_minus_one_and_adds_no_sample_key(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(4), batch_size=2)
        index = rb.extend(_rows(4))
        assert not rb.writer.tracks_generations
        assert rb.writer.generations_of(index).tolist() == [-1] * 4
        assert "index_generation" not in rb.sample().keys()

    def test_each_write_counts_even_inside_one_wrapping_extend(self):
        rb = ReplayBuffer(
            storage=LazyTensorStorage(3), writer=RoundRobinWriter(track_generations=True)
        )
        rb.extend(torch.arange(8))  # slots 0, 1 written three times, slot 2 twice
        assert rb.writer.generations_of(torch.arange(3)).tolist() == [2, 2, 1]
        rb.add(torch.tensor(9))  # lands on slot 2
        assert rb.writer.generations_of(torch.arange(3)).tolist() == [2, 2, 2]

    def test_unwritten_and_out_of_range_slots_are_minus_one(self):
        rb = ReplayBuffer(
            storage=LazyTensorStorage(4), writer=RoundRobinWriter(track_generations=True)
        )
        rb.extend(torch.arange(2))
        assert rb.writer.generations_of(torch.tensor([0, 1, 2, 3, -1, 50])).tolist() == [
            0, 0, -1, -1, -1, -1,
        ]  # fmt: skip

    def test_empty_advances_written_slots_only(self):
        rb = ReplayBuffer(
            storage=LazyTensorStorage(4), writer=RoundRobinWriter(track_generations=True)
        )
        rb.extend(torch.arange(3))
        rb.empty()
        assert rb.writer.generations_of(torch.arange(4)).tolist() == [1, 1, 1, -1]

    def test_buffers_sharing_a_storage_see_each_others_writes(self):
        storage = LazyTensorStorage(4)
        tracked = ReplayBuffer(storage=storage, writer=RoundRobinWriter(track_generations=True))
        other = ReplayBuffer(storage=storage)  # does not track, still stamps the slots
        index = tracked.extend(torch.arange(4))
        before = tracked.writer.generations_of(index)
        other.extend(torch.arange(2))
        assert (tracked.writer.generations_of(index) != before).tolist() == [
            True, True, False, False,
        ]  # fmt: skip

    def test_samples_carry_the_generation_of_their_index(self):
        rb = _tracked()
        rb.extend(_rows(6))
        rb.extend(_rows(2))
        sample, info = rb.sample(return_info=True)
        expected = rb.writer.generations_of(sample["index"])
        assert torch.equal(sample["index_generation"], expected)
        assert torch.equal(info["index_generation"], expected)

    def test_state_dict_keeps_generations(self):
        rb = _tracked(4)
        rb.extend(_rows(6))
        restored = _tracked(4)
        restored.load_state_dict(rb.state_dict())
        assert restored.writer.generations_of(torch.arange(4)).tolist() == [1, 1, 0, 0]

    def test_track_generations_must_be_a_bool(self):
        with pytest.raises(TypeError, match="track_generations"):
            RoundRobinWriter(track_generations="yes")


class TestUpdateIfPresent:
    def test_only_live_records_are_patched_in_input_order(self):
        rb = _tracked()
        index = rb.extend(_rows(6))
        generation = rb.writer.generations_of(index)
        rb.extend(_rows(2, start=100.0))  # recycles slots 0 and 1
        order = torch.tensor([4, 1, 5, 0])
        result = rb.update_if_present(
            index=index[order], generation=generation[order], patch={"x": torch.full((4,), -7.0)}
        )
        assert result.updated.tolist() == [True, False, True, False]
        assert (result.updated_count, result.stale_count) == (2, 2)
        assert result.version_rejected is None
        assert rb[:]["x"].tolist() == [100.0, 101.0, 2.0, 3.0, -7.0, -7.0]

    def test_a_patch_keeps_the_handle_valid(self):
        rb = _tracked()
        index = rb.extend(_rows(6))
        generation = rb.writer.generations_of(index)
        for value in (1.0, 2.0):
            result = rb.update_if_present(
                index=index, generation=generation, patch={"x": torch.full((6,), value)}
            )
            assert result.updated.all()
        assert rb[:]["x"].tolist() == [2.0] * 6

    def test_bad_patch_writes_nothing(self):
        rb = _tracked()
        index = rb.extend(_rows(6))
        generation = rb.writer.generations_of(index)
        with pytest.raises(KeyError):
            rb.update_if_present(
                index=index,
                generation=generation,
                patch={"x": torch.ones(6), "missing": torch.ones(6)},
            )
        with pytest.raises(ValueError, match="shape"):
            rb.update_if_present(index=index, generation=generation, patch={"x": torch.ones(6, 2)})
        with pytest.raises(ValueError, match="dtype"):
            rb.update_if_present(
                index=index, generation=generation, patch={"x": torch.ones(6, dtype=torch.int64)}
            )
        assert rb[:]["x"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]

    def test_needs_generation_tracking_and_a_tensor_storage(self):
        plain = TensorDictReplayBuffer(storage=LazyTensorStorage(4))
        index = plain.extend(_rows(4))
        with pytest.raises(RuntimeError, match="conditional"):
            plain.update_if_present(index=index, generation=torch.zeros(4), patch={})
        listed = ReplayBuffer(
            storage=ListStorage(4), writer=RoundRobinWriter(track_generations=True)
        )
        listed.extend([torch.zeros(2)] * 2)
        with pytest.raises(RuntimeError, match="conditional"):
            listed.update_if_present(index=torch.arange(2), generation=torch.zeros(2), patch={})

    def test_memmap_storage_and_nested_keys(self, tmp_path):
        rb = _tracked(storage=LazyMemmapStorage(4, scratch_dir=tmp_path))
        data = TensorDict({("a", "b"): torch.zeros(4, 2)}, [4])
        index = rb.extend(data)
        result = rb.update_if_present(
            index=index,
            generation=rb.writer.generations_of(index),
            patch={("a", "b"): torch.ones(4, 2)},
        )
        assert result.updated_count == 4
        assert (rb[:]["a", "b"] == 1).all()


class TestVersionedUpdate:
    def _buffer(self):
        rb = _tracked(4)
        index = rb.extend(_rows(4))
        return rb, index, rb.writer.generations_of(index)

    def test_newer_versions_win_and_are_stored(self):
        rb, index, generation = self._buffer()
        result = rb.update_if_present(
            index=index,
            generation=generation,
            patch={"x": torch.full((4,), 9.0)},
            version_key="v",
            version=torch.tensor([1, 0, 1, 0]),
            require_newer=True,
        )
        assert result.updated.tolist() == [True, False, True, False]
        assert result.version_rejected.tolist() == [False, True, False, True]
        assert (result.version_rejected_count, result.stale_count) == (2, 0)
        assert rb[:]["v"].tolist() == [1, 0, 1, 0]
        assert rb[:]["x"].tolist() == [9.0, 1.0, 9.0, 3.0]

    def test_ties_win_unless_require_newer(self):
        rb, index, generation = self._buffer()
        result = rb.update_if_present(
            index=index,
            generation=generation,
            patch={"x": torch.ones(4)},
            version_key="v",
            version=0,
        )
        assert result.updated.all()

    def test_duplicate_handles_keep_the_highest_version(self):
        rb, index, generation = self._buffer()
        result = rb.update_if_present(
            index=index[[2, 2, 2]],
            generation=generation[[2, 2, 2]],
            patch={"x": torch.tensor([5.0, 8.0, 6.0])},
            version_key=("v",),
            version=torch.tensor([5, 8, 6]),
        )
        assert result.updated.tolist() == [False, True, False]
        assert result.version_rejected.tolist() == [True, False, True]
        assert rb[:]["x"][2].item() == 8.0 and rb[:]["v"][2].item() == 8

    def test_stale_records_are_not_counted_as_rejected(self):
        rb, index, generation = self._buffer()
        rb.extend(_rows(1))
        result = rb.update_if_present(
            index=index,
            generation=generation,
            patch={"x": torch.ones(4)},
            version_key="v",
            version=5,
        )
        assert result.updated.tolist() == [False, True, True, True]
        assert (result.stale_count, result.version_rejected_count) == (1, 0)

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            ({"version_key": "v"}, "together"),
            ({"version": 3}, "together"),
            ({"version_key": "missing", "version": 3}, "missing"),
            ({"version_key": "v", "version": 3, "patch": {"v": torch.ones(4, dtype=torch.int64)}},
             "may not appear in patch"),
            ({"version_key": "a.v", "version": 3}, "tuple form"),
            ({"version_key": "v", "version": torch.ones(3)}, "one entry per index"),
        ],
    )  # fmt: skip
    def test_refused_arguments_write_nothing(self, kwargs, match):
        rb, index, generation = self._buffer()
        kwargs = {"patch": {"x": torch.ones(4)}, **kwargs}
        with pytest.raises((ValueError, KeyError), match=match):
            rb.update_if_present(index=index, generation=generation, **kwargs)
        assert rb[:]["x"].tolist() == [0.0, 1.0, 2.0, 3.0]
        assert rb[:]["v"].tolist() == [0, 0, 0, 0]


def test_checkpoint_keeps_generations(tmp_path):
    rb = _tracked(4)
    rb.extend(_rows(5))
    rb.dumps(tmp_path / "ckpt")
    restored = _tracked(4)
    restored.loads(tmp_path / "ckpt")
    assert restored.writer.generations_of(torch.arange(4)).tolist() == [1, 0, 0, 0]
