"""A prefetching buffer's batches in flight survive ``state_dict`` and pickling."""

from __future__ import annotations

import pickle

import torch
from tensordict import TensorDict

from rl_replay import ListStorage, ReplayBuffer, TensorDictReplayBuffer


def _prefetching(seed, cls=ReplayBuffer):
    rb = cls(
        storage=ListStorage(16),
        batch_size=4,
        prefetch=3,
        generator=torch.Generator().manual_seed(seed),
    )
    data = torch.arange(16) * 10
    rb.extend(TensorDict({"x": data}, [16]) if cls is TensorDictReplayBuffer else data)
    return rb


def _same_stream(source, copy, steps=5):
    for _ in range(steps):
        expected, expected_info = source.sample(return_info=True)
        found, found_info = copy.sample(return_info=True)
        assert torch.equal(expected_info["index"], found_info["index"])
        if isinstance(expected, torch.Tensor):
            assert torch.equal(expected, found)
        else:
            assert torch.equal(expected["x"], found["x"])


def test_load_state_dict_continues_the_source_stream():
    source = _prefetching(0)
    source.sample()  # batches are now in flight
    copy = _prefetching(7)
    copy.sample()  # its own batches in flight are dropped by the load
    copy.load_state_dict(source.state_dict())
    _same_stream(source, copy)


def test_tensordict_buffer_state_dict_keeps_pending_batches():
    source = _prefetching(0, TensorDictReplayBuffer)
    source.sample()
    copy = _prefetching(3, TensorDictReplayBuffer)
    copy.load_state_dict(source.state_dict())
    _same_stream(source, copy)


def test_pickled_buffer_continues_the_source_stream():
    source = _prefetching(0)
    source.sample()
    _same_stream(source, pickle.loads(pickle.dumps(source)))


def test_state_without_pending_batches_loads_into_a_prefetching_buffer():
    source = ReplayBuffer(
        storage=ListStorage(16), batch_size=4, generator=torch.Generator().manual_seed(0)
    )
    source.extend(torch.arange(16))
    copy = _prefetching(5)
    copy.sample()
    copy.load_state_dict(source.state_dict())
    assert copy.sample().shape == (4,)


def test_prefetching_buffers_do_not_draw_from_each_others_generator():
    first, second = _prefetching(11), _prefetching(11)
    for _ in range(30):  # both keep batches in flight in their own threads meanwhile
        assert torch.equal(first.sample(), second.sample())
