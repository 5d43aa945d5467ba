"""``ReplayBuffer(consume_after_n_samples=n)``: elements leave after ``n`` draws."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_replay import (
    LazyMemmapStorage,
    LazyTensorStorage,
    ListStorage,
    PrioritizedSampler,
    ReplayBuffer,
    SamplerWithoutReplacement,
    TensorDictReplayBuffer,
)


def test_single_use_elements_drain_the_buffer():
    rb = ReplayBuffer(storage=ListStorage(6), batch_size=4, consume_after_n_samples=1)
    rb.extend([torch.tensor(value) for value in range(6)])
    first = rb.sample()
    assert len(first) == 4 and len(set(first.tolist())) == 4
    assert len(rb) == 2
    rest = rb.sample()  # fewer left than asked for
    assert sorted(first.tolist() + rest.tolist()) == list(range(6))
    assert len(rb) == 0
    with pytest.raises(RuntimeError, match="Cannot sample from an empty storage"):
        rb.sample()


def test_elements_survive_until_their_nth_draw():
    rb = ReplayBuffer(storage=LazyTensorStorage(3), batch_size=3, consume_after_n_samples=3)
    rb.extend(torch.arange(3))
    for _ in range(2):
        assert sorted(rb.sample().tolist()) == [0, 1, 2]
        assert len(rb) == 3
    rb.sample()
    assert len(rb) == 0


def test_writes_fill_consumed_slots_before_the_cursor():
    rb = ReplayBuffer(storage=LazyTensorStorage(10), consume_after_n_samples=1)
    rb.extend(torch.arange(5))
    _, info = rb.sample(2, return_info=True)
    consumed = info["index"].tolist()
    index = rb.extend(torch.tensor([100, 101, 102]))
    assert index.tolist() == [*consumed, 5]
    assert rb.storage.get(index).tolist() == [100, 101, 102]
    assert len(rb) == 6 and len(rb.storage) == 6
    assert rb.add(torch.tensor(7)) == 6  # no consumed slot left: the cursor moves


def test_added_element_reuses_a_consumed_slot():
    rb = ReplayBuffer(storage=ListStorage(4), consume_after_n_samples=1)
    rb.extend([torch.tensor(0), torch.tensor(1)])
    slot = int(rb.sample(1, return_info=True)[1]["index"][0])
    assert rb.add(torch.tensor(9)) == slot
    assert len(rb) == 2


def test_tensordict_buffer_on_memmap(tmp_path):
    rb = TensorDictReplayBuffer(
        storage=LazyMemmapStorage(6, scratch_dir=tmp_path), consume_after_n_samples=1
    )
    rb.extend(TensorDict({"a": torch.arange(4)}, [4]))
    assert rb.sample(3)["index"].unique().numel() == 3
    assert rb.sample(3)["index"].numel() == 1
    assert len(rb) == 0


def test_state_dict_keeps_counts_and_free_slots():
    rb = ReplayBuffer(storage=LazyTensorStorage(4), batch_size=2, consume_after_n_samples=2)
    rb.extend(torch.arange(4))
    drawn = rb.sample(return_info=True)[1]["index"]
    rb.sample()
    state = rb.state_dict()
    copy = ReplayBuffer(storage=LazyTensorStorage(4), batch_size=2, consume_after_n_samples=2)
    copy.load_state_dict(state)
    state["_sampler"]["counts"].fill_(0)  # the copy holds its own tensors
    assert len(copy) == len(rb)
    assert (
        copy.sampler.state_dict()["counts"].tolist() == rb.sampler.state_dict()["counts"].tolist()
    )
    assert drawn.numel() == 2


def test_checkpoint_keeps_the_consumed_state(tmp_path):
    rb = ReplayBuffer(storage=LazyTensorStorage(4), batch_size=4, consume_after_n_samples=1)
    rb.extend(torch.arange(4))
    rb.sample(3)
    rb.dumps(tmp_path / "ckpt")
    copy = ReplayBuffer(storage=LazyTensorStorage(4), batch_size=4, consume_after_n_samples=1)
    copy.loads(tmp_path / "ckpt")
    assert len(copy) == 1
    assert copy.sample().numel() == 1


def test_empty_forgets_consumption():
    rb = ReplayBuffer(storage=LazyTensorStorage(4), consume_after_n_samples=1)
    rb.extend(torch.arange(4))
    rb.sample(4)
    rb.empty()
    assert rb.extend(torch.arange(2)).tolist() == [0, 1]
    assert len(rb) == 2


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"consume_after_n_samples": 0}, ValueError, "positive integer"),
        ({"consume_after_n_samples": 1.5}, TypeError, "positive integer"),
        ({"consume_after_n_samples": True}, TypeError, "positive integer"),
        ({"consume_after_n_samples": 1, "prefetch": 2}, ValueError, "Prefetching"),
        ({"consume_after_n_samples": 1, "sampler": SamplerWithoutReplacement()}, ValueError,
         "RandomSampler"),
        ({"consume_after_n_samples": 1, "sampler": PrioritizedSampler(8, 0.7, 0.5)}, ValueError,
         "RandomSampler"),
        ({"consume_after_n_samples": 1, "storage": LazyTensorStorage(8, ndim=2)}, ValueError,
         "1-dimensional"),
    ],
)  # fmt: skip
def test_refused_configurations(kwargs, error, match):
    kwargs = {"storage": ListStorage(8), **kwargs}
    with pytest.raises(error, match=match):
        ReplayBuffer(**kwargs)
