"""Ensembles: StorageEnsemble, WriterEnsemble, ReplayBufferEnsemble and their checkpoints."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_replay import (
    LazyTensorStorage,
    ListStorage,
    PrioritizedSampler,
    ReplayBuffer,
    ReplayBufferEnsemble,
    RoundRobinWriter,
    StorageEnsemble,
    StorageEnsembleCheckpointer,
    TensorDictReplayBuffer,
    WriterEnsemble,
)


def _buffers():
    rbs = []
    for value in (0.0, 1.0):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10))
        rb.extend(TensorDict({"x": torch.full((6,), value), "i": torch.arange(6)}, [6]))
        rbs.append(rb)
    return rbs


class TestStorageEnsemble:
    def test_int_index_returns_a_storage_and_len_counts_storages(self):
        first, second = LazyTensorStorage(3), ListStorage(4)
        ensemble = StorageEnsemble(first, second)
        assert ensemble[1] is second and len(ensemble) == 2 and ensemble.max_size == 7

    def test_transforms_are_applied_per_storage(self):
        first, second = LazyTensorStorage(3), LazyTensorStorage(3)
        first.set(torch.arange(1), torch.ones(1))
        second.set(torch.arange(1), torch.ones(1))
        ensemble = StorageEnsemble(first, second, transforms=[None, lambda x: x * 10])
        out = ensemble[(torch.tensor([0, 1]), [torch.tensor([0]), torch.tensor([0])])]
        assert [t.item() for t in out] == [1.0, 10.0]

    def test_set_raises(self):
        with pytest.raises(RuntimeError, match="read-only"):
            StorageEnsemble(LazyTensorStorage(3)).set(0, torch.ones(()))

    def test_needs_a_storage(self):
        with pytest.raises(ValueError, match="at least one storage"):
            StorageEnsemble()

    def test_transforms_length_must_match(self):
        with pytest.raises(ValueError, match="one transform per storage"):
            StorageEnsemble(LazyTensorStorage(3), transforms=[None, None])

    def test_state_dict_and_empty(self):
        first = LazyTensorStorage(3)
        first.set(torch.arange(2), torch.ones(2))
        ensemble = StorageEnsemble(first)
        other = StorageEnsemble(LazyTensorStorage(3))
        other.load_state_dict(ensemble.state_dict())
        assert len(other[0]) == 2
        ensemble._empty()
        assert len(first) == 0
        with pytest.raises(ValueError, match="expected 2 states, got 1"):
            StorageEnsemble(LazyTensorStorage(3), LazyTensorStorage(3)).load_state_dict(
                ensemble.state_dict()
            )


class TestStorageEnsembleCheckpointer:
    def test_is_the_default_and_round_trips(self, tmp_path):
        ensemble = StorageEnsemble(LazyTensorStorage(4), ListStorage(4))
        assert isinstance(ensemble.checkpointer, StorageEnsembleCheckpointer)
        ensemble[0].set(torch.arange(3), torch.arange(3))
        ensemble[1].set(torch.arange(2), ["a", "b"])
        ensemble.dumps(tmp_path)
        restored = StorageEnsemble(LazyTensorStorage(4), ListStorage(4))
        restored.loads(tmp_path)
        assert restored[0].get(torch.arange(3)).tolist() == [0, 1, 2] and restored[1].get(1) == "b"

    def test_size_mismatch_raises(self, tmp_path):
        StorageEnsemble(LazyTensorStorage(4)).dumps(tmp_path)
        with pytest.raises(ValueError, match="expected a checkpoint of 2 storages, found 1"):
            StorageEnsemble(LazyTensorStorage(4), LazyTensorStorage(4)).loads(tmp_path)


class TestWriterEnsemble:
    @pytest.mark.parametrize("method", ["add", "extend"])
    def test_writes_raise(self, method):
        with pytest.raises(RuntimeError, match=r"ensemble\[i\]"):
            getattr(WriterEnsemble(RoundRobinWriter()), method)(torch.zeros(1))

    def test_state_round_trip_and_empty(self):
        first = RoundRobinWriter()
        first._cursor = 3
        ensemble = WriterEnsemble(first, RoundRobinWriter())
        other = WriterEnsemble(RoundRobinWriter(), RoundRobinWriter())
        other.load_state_dict(ensemble.state_dict())
        assert other[0]._cursor == 3
        ensemble._empty()
        assert first._cursor == 0
        with pytest.raises(ValueError, match="expected 1 states, got 2"):
            WriterEnsemble(RoundRobinWriter()).load_state_dict(ensemble.state_dict())

    def test_needs_a_writer(self):
        with pytest.raises(ValueError, match="at least one writer"):
            WriterEnsemble()


class TestReplayBufferEnsemble:
    def test_sample_stacks_one_sub_batch_per_buffer(self):
        rb = ReplayBufferEnsemble(*_buffers(), sample_from_all=True, batch_size=8)
        sample = rb.sample()
        assert sample.batch_size == (2, 4)
        assert sample["x"][0].unique().tolist() == [0.0] and sample["x"][1].unique().tolist() == [
            1.0
        ]

    def test_probabilities_pick_buffers(self):
        rb = ReplayBufferEnsemble(*_buffers(), p=[0.0, 1.0], num_buffer_sampled=1)
        assert rb.sample(4)["x"].unique().tolist() == [1.0]

    def test_info_index_and_ensemble_transform(self):
        rb = ReplayBufferEnsemble(
            *_buffers(), sample_from_all=True, transform=lambda td: td.set("y", td["x"] + 1)
        )
        data, info = rb.sample(4, return_info=True)
        buffer_ids, indices = info["index"]
        assert buffer_ids.tolist() == [0, 1] and len(indices) == 2
        assert torch.equal(data["y"], data["x"] + 1)

    def test_tensordict_samples_carry_buffer_ids_when_iterating(self):
        rbs = []
        for value in (0, 1, 2):
            rb = ReplayBuffer(storage=LazyTensorStorage(10))  # plain buffers: no "index" entry
            rb.extend(TensorDict({"x": torch.full((6,), value)}, [6]))
            rbs.append(rb)
        rb = ReplayBufferEnsemble(*rbs, p=[0.0, 0.5, 0.5], num_buffer_sampled=4, batch_size=8)
        sample = next(iter(rb))
        ids = sample["index", "buffer_ids"]
        assert ids.shape == (4, 2) and 0 not in ids.unique().tolist()
        assert torch.equal(ids, sample["x"])  # each element's id is the buffer it came from

    def test_sub_buffer_transforms_apply(self):
        first, second = _buffers()
        first.append_transform(lambda td: td.set("x", td["x"] + 5))
        rb = ReplayBufferEnsemble(first, second, sample_from_all=True)
        assert rb.sample(4)["x"][0].unique().tolist() == [5.0]

    def test_indexing_len_and_read_only(self):
        rbs = _buffers()
        rb = ReplayBufferEnsemble(*rbs)
        assert rb[1] is rbs[1] and len(rb) == 2
        with pytest.raises(RuntimeError, match="read-only"):
            rb.extend(TensorDict({"x": torch.zeros(1)}, [1]))
        with pytest.raises(RuntimeError, match="read-only"):
            rb.add(TensorDict({"x": torch.zeros(())}, []))

    def test_needs_a_buffer(self):
        with pytest.raises(ValueError, match="at least one replay buffer"):
            ReplayBufferEnsemble()

    def test_priorities_are_routed_to_sub_samplers(self):
        rbs = [
            ReplayBuffer(
                storage=LazyTensorStorage(8), sampler=PrioritizedSampler(8, 1.0, 1.0, eps=0.0)
            )
            for _ in range(2)
        ]
        for rb in rbs:
            rb.extend(torch.arange(4))
        ensemble = ReplayBufferEnsemble(*rbs, sample_from_all=True)
        index = (torch.tensor([0, 1]), [torch.arange(4), torch.arange(4)])
        ensemble.update_priority(index, torch.tensor([0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0]))
        sample = ensemble.sample(8)
        assert sample[0].unique().tolist() == [2] and sample[1].unique().tolist() == [3]

    def test_dumps_loads_round_trip(self, tmp_path):
        rb = ReplayBufferEnsemble(*_buffers(), sample_from_all=True, batch_size=4)
        rb.dumps(tmp_path / "ck")
        fresh = [TensorDictReplayBuffer(storage=LazyTensorStorage(10)) for _ in range(2)]
        restored = ReplayBufferEnsemble(*fresh, sample_from_all=True, batch_size=4)
        restored.loads(tmp_path / "ck")
        assert len(fresh[1]) == 6 and fresh[1][:]["x"].unique().tolist() == [1.0]
        torch.manual_seed(1)
        expected = rb.sample()
        torch.manual_seed(1)
        assert (restored.sample() == expected).all()
