"""SamplerWithoutReplacement: epochs that visit every element once."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_replay import LazyTensorStorage, ReplayBuffer
from rl_replay.samplers import SamplerWithoutReplacement


def buffer(size: int, capacity: int = 100, ndim: int = 1, **kwargs) -> ReplayBuffer:
    rb = ReplayBuffer(
        storage=LazyTensorStorage(capacity, ndim=ndim),
        sampler=SamplerWithoutReplacement(**kwargs),
        batch_size=3,
    )
    shape = [size] if ndim == 1 else [2, size // 2]
    rb.extend(TensorDict({"x": torch.zeros(shape)}, shape))
    return rb


class TestSamplerWithoutReplacement:
    @pytest.mark.parametrize("shuffle", [True, False])
    def test_epoch_visits_every_element_once(self, shuffle):
        rb = buffer(10, shuffle=shuffle)
        batches = [rb._sampler.sample(rb._storage, 3)[0] for _ in range(4)]
        assert [b.numel() for b in batches] == [3, 3, 3, 1]
        assert sorted(torch.cat(batches).tolist()) == list(range(10))
        assert rb._sampler.ran_out
        if not shuffle:
            assert torch.cat(batches).tolist() == list(range(10))

    def test_drop_last_skips_partial_batch(self):
        rb = buffer(10, drop_last=True)
        sizes = [rb._sampler.sample(rb._storage, 3)[0].numel() for _ in range(3)]
        assert sizes == [3, 3, 3] and rb._sampler.ran_out
        rb._sampler.sample(rb._storage, 3)
        assert not rb._sampler.ran_out

    def test_drop_last_with_too_few_elements_raises(self):
        rb = buffer(2, drop_last=True)
        with pytest.raises(ValueError, match="at least 3 items to draw a full batch, found 2"):
            rb._sampler.sample(rb._storage, 3)

    def test_new_epoch_when_length_changes(self):
        rb = buffer(4, shuffle=False)
        rb._sampler.sample(rb._storage, 3)
        rb.extend(TensorDict({"x": torch.zeros(2)}, [2]))
        assert rb._sampler.sample(rb._storage, 3)[0].tolist() == [0, 1, 2]

    def test_buffer_iteration_stops_at_epoch_end(self):
        rb = buffer(10, shuffle=False)
        rb._batch_size = 4
        assert sum(batch.batch_size[0] for batch in rb) == 10

    def test_multidim_storage(self):
        rb = buffer(6, capacity=12, ndim=2)
        rows, cols = rb._sampler.sample(rb._storage, 6)[0]
        assert sorted(zip(rows.tolist(), cols.tolist())) == [
            (r, c) for r in range(3) for c in range(2)
        ]

    def test_empty_restarts(self):
        rb = buffer(5, shuffle=False)
        rb._sampler.sample(rb._storage, 2)
        rb.empty()
        rb.extend(TensorDict({"x": torch.zeros(5)}, [5]))
        assert rb._sampler.sample(rb._storage, 2)[0].tolist() == [0, 1]

    @pytest.mark.parametrize("via", ["state_dict", "dumps"])
    def test_round_trip_continues_the_epoch(self, via, tmp_path):
        rb = buffer(20)
        rb._sampler.sample(rb._storage, 5)
        other = SamplerWithoutReplacement()
        if via == "dumps":
            rb._sampler.dumps(tmp_path)
            other.loads(tmp_path)
        else:
            other.load_state_dict(rb._sampler.state_dict())
        assert torch.equal(other.sample(rb._storage, 15)[0], rb._sampler.sample(rb._storage, 15)[0])
        assert other.ran_out and rb._sampler.ran_out


def test_the_next_epoch_order_is_drawn_when_an_epoch_ends():
    rb = ReplayBuffer(storage=LazyTensorStorage(4), sampler=SamplerWithoutReplacement())
    rb.extend(torch.arange(4))
    rb.sample(4)
    assert rb.sampler.ran_out
    upcoming = rb.sampler.state_dict()["remaining"]
    assert sorted(upcoming.tolist()) == [0, 1, 2, 3]
    assert rb.sample(4).tolist() == upcoming.tolist()
    assert rb.sampler.ran_out
