"""TensorDictReplayBuffer and the prioritized buffers: index write-back and priorities."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_replay import (
    LazyMemmapStorage,
    LazyTensorStorage,
    ListStorage,
    PrioritizedReplayBuffer,
    PrioritizedSampler,
    TensorDictPrioritizedReplayBuffer,
    TensorDictReplayBuffer,
    TensorDictRoundRobinWriter,
)


def _td(count, offset=0):
    return TensorDict(
        {"a": torch.arange(offset, offset + count), "obs": torch.randn(count, 3)}, [count]
    )


class TestTensorDictReplayBuffer:
    def test_default_writer_is_tensordict_round_robin(self):
        assert isinstance(TensorDictReplayBuffer().writer, TensorDictRoundRobinWriter)

    @pytest.mark.parametrize(
        "make_storage",
        [lambda: ListStorage(20), lambda: LazyTensorStorage(20), lambda: LazyMemmapStorage(20)],
    )
    def test_sample_writes_index_back(self, make_storage):
        rb = TensorDictReplayBuffer(storage=make_storage(), batch_size=12)
        rb.extend(_td(10))
        sample = rb.sample()
        assert torch.equal(sample["a"], sample["index"])

    def test_index_written_back_is_stacked_for_multi_dim_storage(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(12, ndim=2), batch_size=5)
        rb.extend(TensorDict({"a": torch.arange(12).reshape(3, 4)}, [3, 4]))
        sample = rb.sample()
        assert sample["index"].shape == (5, 2)
        # storage dims are [time, env]: data [env=3, time=4] was transposed on write
        time, env = sample["index"].unbind(-1)
        assert torch.equal(sample["a"], env * 4 + time)

    def test_priority_key_default(self):
        assert TensorDictReplayBuffer().priority_key == "td_error"

    def test_update_tensordict_priority_missing_key_raises(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10), batch_size=4)
        rb.extend(_td(5))
        with pytest.raises(KeyError, match="expected the key 'td_error'"):
            rb.update_tensordict_priority(rb.sample())

    def test_extend_with_a_pytree_raises(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10))
        with pytest.raises(TypeError, match="expected a tensordict"):
            rb.extend(torch.zeros(3))

    def test_sampled_tensordict_is_independent_of_the_storage(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10), batch_size=4)
        rb.extend(_td(5))
        sample = rb.sample()
        sample["a"] += 100
        assert rb[:]["a"].max() < 100


class TestPrioritizedReplayBuffer:
    def test_uses_a_prioritized_sampler_sized_from_storage(self):
        rb = PrioritizedReplayBuffer(alpha=0.7, beta=0.5, storage=LazyTensorStorage(32))
        assert isinstance(rb.sampler, PrioritizedSampler) and rb.sampler.max_capacity == 32

    def test_update_priority_steers_sampling(self):
        rb = PrioritizedReplayBuffer(
            alpha=1.0, beta=1.0, storage=LazyTensorStorage(10), batch_size=64
        )
        rb.extend(torch.arange(5))
        rb.update_priority(torch.arange(5), torch.tensor([0.0, 0.0, 5.0, 0.0, 0.0]))
        data, info = rb.sample(return_info=True)
        assert data.unique().tolist() == [2]
        assert info["priority_weight"].shape == (64,)

    def test_missing_alpha_beta_raise(self):
        with pytest.raises(TypeError, match="alpha"):
            PrioritizedReplayBuffer(beta=0.5)


class TestTensorDictPrioritizedReplayBuffer:
    def test_update_tensordict_priority_round_trip(self):
        torch.manual_seed(0)
        rb = TensorDictPrioritizedReplayBuffer(
            alpha=1.0, beta=1.0, storage=LazyTensorStorage(10), batch_size=32, eps=0.0
        )
        rb.extend(_td(4))
        sample = rb.sample()
        sample["td_error"] = torch.where(sample["a"] == 1, 1.0, 0.0)
        rb.update_tensordict_priority(sample)
        sampled = rb.sample()
        assert sampled["a"].unique().tolist() == [1]
        assert "priority_weight" in sampled.keys()

    def test_priorities_read_from_written_data(self):
        rb = TensorDictPrioritizedReplayBuffer(
            alpha=1.0, beta=1.0, storage=LazyTensorStorage(10), batch_size=16
        )
        data = _td(4)
        data["td_error"] = torch.tensor([0.0, 0.0, 0.0, 3.0])
        rb.extend(data)
        assert rb.sample()["a"].unique().tolist() == [3]

    def test_extend_can_keep_the_default_priority(self):
        rb = TensorDictPrioritizedReplayBuffer(
            alpha=1.0, beta=1.0, storage=LazyTensorStorage(10), batch_size=64
        )
        data = _td(4)
        data["td_error"] = torch.tensor([0.0, 0.0, 0.0, 3.0])
        rb.extend(data, update_priority=False)
        assert sorted(rb.sample()["a"].unique().tolist()) == [0, 1, 2, 3]

    def test_update_at_a_position_never_written_is_refused(self):
        rb = TensorDictPrioritizedReplayBuffer(alpha=1.0, beta=1.0, storage=LazyTensorStorage(10))
        rb.extend(_td(4))
        with pytest.raises(ValueError, match=r"len\(storage\)=4\), got \[7\]"):
            rb.update_priority(torch.tensor([1, 7]), torch.tensor([1.0, 5.0]))
        assert sorted(rb.sample(64)["a"].unique().tolist()) == [0, 1, 2, 3]

    def test_whole_trajectories_as_elements(self):
        rb = TensorDictPrioritizedReplayBuffer(
            alpha=0.7, beta=0.9, storage=ListStorage(5), batch_size=3, reduction="max"
        )
        rb.extend(TensorDict({"obs": torch.arange(12.0).view(3, 4)}, [3, 4]))  # 3 trajectories
        sample = rb.sample()
        assert sample.batch_size == (3, 4)
        assert sample["index"].shape == (3, 4) and sample["priority_weight"].shape == (3, 4)
        assert (sample["index"] == sample["index"][:, :1]).all()  # one index per trajectory
        sample["td_error"] = torch.zeros(3, 4)  # priorities shaped like the sampled index
        sample["td_error"][:, -1] = 1.0
        rb.update_tensordict_priority(sample)
        assert (rb.sample()["priority_weight"] > 0).all()

    def test_custom_priority_key_and_trailing_dims_reduced(self):
        rb = TensorDictPrioritizedReplayBuffer(
            alpha=1.0,
            beta=1.0,
            priority_key="p",
            storage=LazyTensorStorage(10),
            batch_size=16,
            reduction="max",
        )
        data = _td(3)
        data["p"] = torch.tensor([[0.0, 0.0], [0.0, 2.0], [0.0, 0.0]])
        rb.extend(data)
        assert rb.sample()["a"].unique().tolist() == [1]

    def test_multi_dim_storage_priorities(self):
        torch.manual_seed(0)
        rb = TensorDictPrioritizedReplayBuffer(
            alpha=1.0, beta=1.0, storage=LazyTensorStorage(12, ndim=2), batch_size=64, eps=0.0
        )
        rb.extend(TensorDict({"a": torch.arange(12).reshape(3, 4)}, [3, 4]))
        sample = rb.sample()
        assert sorted(sample["a"].unique().tolist()) == list(range(12))  # every element drawn
        sample["td_error"] = (sample["a"] == 6).float()
        rb.update_tensordict_priority(sample)
        assert rb.sample()["a"].unique().tolist() == [6]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
class TestBuffersOnCuda:
    @pytest.mark.parametrize("sampler", [None, "prioritized"])
    def test_cpu_data_is_stored_and_sampled_on_the_storage_device(self, sampler):
        kwargs = {"sampler": PrioritizedSampler(32, 0.7, 0.5)} if sampler else {}
        rb = TensorDictReplayBuffer(
            storage=LazyTensorStorage(32, device="cuda"), batch_size=8, **kwargs
        )
        data = _td(20)
        rb.extend(data)
        sample = rb.sample()
        assert sample["obs"].device.type == "cuda"
        picked = sample["a"].cpu()
        torch.testing.assert_close(sample["obs"].cpu(), data["obs"][picked])
        if sampler:
            rb.update_tensordict_priority(sample.set("td_error", torch.rand(8, device="cuda")))
