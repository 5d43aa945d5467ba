"""ReplayBuffer: writes, reads, sampling, transforms, prefetching, threads and bad input."""

from __future__ import annotations

import threading

import pytest
import torch
from tensordict import TensorDict

from rl_replay import (
    LazyMemmapStorage,
    LazyTensorStorage,
    ListStorage,
    RandomSampler,
    ReplayBuffer,
    RoundRobinWriter,
    SamplerWithoutReplacement,
    SliceSampler,
    TensorStorage,
)

STORAGES = [
    pytest.param(lambda n: ListStorage(n), id="list"),
    pytest.param(lambda n: LazyTensorStorage(n), id="lazy_tensor"),
    pytest.param(lambda n: LazyMemmapStorage(n), id="lazy_memmap"),
]


def _td(count, offset=0):
    return TensorDict(
        {"obs": torch.arange(offset, offset + count).float(), ("next", "r"): torch.zeros(count, 2)},
        [count],
    )


class _AddOne:
    """A transform with an inverse: +1 on read, -1 on write."""

    def __call__(self, data):
        return data + 1

    def inv(self, data):
        return data - 1


class TestReplayBuffer:
    def test_defaults(self):
        rb = ReplayBuffer()
        assert isinstance(rb.storage, ListStorage) and rb.storage.max_size == 1000
        assert isinstance(rb.sampler, RandomSampler) and isinstance(rb.writer, RoundRobinWriter)
        assert rb.batch_size is None and rb.dim_extend == 0

    @pytest.mark.parametrize("make_storage", STORAGES)
    def test_add_extend_len_and_getitem(self, make_storage):
        rb = ReplayBuffer(storage=make_storage(10))
        assert rb.add(torch.tensor(7.0)) == 0
        assert rb.extend(torch.tensor([8.0, 9.0])).tolist() == [1, 2]
        assert len(rb) == 3
        assert float(rb[0]) == 7.0 and float(rb[-1]) == 9.0
        assert rb[:].tolist() == [7.0, 8.0, 9.0]
        assert rb[1:].tolist() == [8.0, 9.0]
        assert rb[torch.tensor([2, 0])].tolist() == [9.0, 7.0]

    @pytest.mark.parametrize("make_storage", STORAGES)
    def test_sample_returns_stored_elements(self, make_storage):
        rb = ReplayBuffer(storage=make_storage(10), batch_size=16)
        rb.extend(torch.arange(5).float())
        sample = rb.sample()
        assert sample.shape == (16,) and set(sample.tolist()) <= {0.0, 1.0, 2.0, 3.0, 4.0}

    def test_sample_return_info_has_index(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(10))
        rb.extend(torch.arange(5) * 10)
        data, info = rb.sample(8, return_info=True)
        assert torch.equal(data, info["index"] * 10)

    def test_sample_batch_size_argument_overrides_default(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=2)
        rb.extend(torch.arange(5))
        assert rb.sample(7).shape == (7,)

    def test_sample_without_batch_size_raises(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(10))
        rb.extend(torch.arange(5))
        with pytest.raises(ValueError, match="expected a batch_size, got None"):
            rb.sample()

    @pytest.mark.parametrize("make_storage", STORAGES)
    def test_sample_from_empty_buffer_raises(self, make_storage):
        rb = ReplayBuffer(storage=make_storage(10), batch_size=2)
        with pytest.raises(RuntimeError, match="empty"):
            rb.sample()

    @pytest.mark.parametrize(
        ("name", "value"), [("batch_size", 0), ("prefetch", -1), ("batch_size", 2.0)]
    )
    def test_bad_constructor_values_raise(self, name, value):
        with pytest.raises(ValueError, match=f"expected {name} to be a positive int"):
            ReplayBuffer(**{name: value})

    def test_drop_last_sampler_needs_a_batch_size(self):
        with pytest.raises(ValueError, match="drop_last=True must work with a predictable batch"):
            ReplayBuffer(sampler=SamplerWithoutReplacement(drop_last=True))
        rb = ReplayBuffer(sampler=SamplerWithoutReplacement(drop_last=True), batch_size=2)
        assert rb.batch_size == 2

    def test_bad_dim_extend_raises(self):
        with pytest.raises(ValueError, match=r"dim_extend < storage\.ndim=1"):
            ReplayBuffer(storage=LazyTensorStorage(4), dim_extend=1)

    def test_list_is_many_items_tuple_is_one_pytree(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(10))
        rb.extend([torch.zeros(2), torch.ones(2), torch.ones(2)])
        assert len(rb) == 3 and rb[:].shape == (3, 2)
        rb_tree = ReplayBuffer(storage=LazyTensorStorage(10))
        rb_tree.extend((torch.zeros(4), torch.ones(4, 3)))
        assert len(rb_tree) == 4
        first = rb_tree[0]
        assert isinstance(first, tuple) and first[1].shape == (3,)

    def test_list_of_pytrees_is_stacked(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(10))
        rb.extend([{"a": torch.zeros(3)}, {"a": torch.ones(3)}])
        assert rb[:]["a"].shape == (2, 3)

    def test_list_storage_keeps_python_objects(self):
        rb = ReplayBuffer(storage=ListStorage(10), batch_size=3)
        rb.add("a string!")
        rb.extend([30, None])
        assert rb[0] == "a string!" and rb[1] == 30 and rb[2] is None
        assert isinstance(rb.sample(), list)

    def test_list_storage_stacks_tensordicts_on_sample(self):
        rb = ReplayBuffer(storage=ListStorage(10), batch_size=4)
        rb.extend([TensorDict({"a": torch.tensor(float(i))}, []) for i in range(3)])
        assert rb.sample().batch_size == (4,)

    @pytest.mark.parametrize("storage_cls", [LazyTensorStorage, LazyMemmapStorage])
    def test_setitem_goes_through_the_inverse_transforms(self, storage_cls):
        rb = ReplayBuffer(storage=storage_cls(10), transform=_AddOne())
        rb.extend(torch.arange(4))
        rb[1] = torch.tensor(41)  # stored as 40, read back as 41
        assert int(rb[1]) == 41 and len(rb) == 4

    def test_setitem_writes_without_moving_cursor(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(5))
        rb.extend(torch.arange(3))
        rb[1] = torch.tensor(42)
        assert len(rb) == 3 and rb[:].tolist() == [0, 42, 2]
        assert rb.extend(torch.tensor([5])).tolist() == [3]

    def test_getitem_by_key_reads_every_valid_element(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(10))
        rb.extend(_td(4))
        assert rb["obs"].tolist() == [0.0, 1.0, 2.0, 3.0]
        assert rb["next", "r"].shape == (4, 2)

    @pytest.mark.parametrize("make_storage", STORAGES)
    def test_empty_resets_length_and_cursor(self, make_storage):
        rb = ReplayBuffer(storage=make_storage(4))
        rb.extend(torch.arange(3))
        rb.empty()
        assert len(rb) == 0
        assert rb.extend(torch.arange(2)).tolist() == [0, 1]

    def test_failed_extend_leaves_buffer_unchanged(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(8))
        rb.extend(_td(3))
        bad = TensorDict({"obs": torch.zeros(2), ("next", "x"): torch.zeros(2, 2)}, [2])
        with pytest.raises(KeyError, match="no entry"):
            rb.extend(bad)
        assert len(rb) == 3 and rb.writer._cursor == 3
        assert rb[:]["obs"].tolist() == [0.0, 1.0, 2.0]

    def test_sampler_rejects_a_write_before_anything_is_stored(self):
        rb = ReplayBuffer(
            storage=LazyTensorStorage(8), sampler=SliceSampler(num_slices=2, traj_key="episode")
        )
        with pytest.raises(KeyError, match="episode"):
            rb.extend(TensorDict({"obs": torch.zeros(2)}, [2]))  # the very first write
        assert len(rb) == 0 and rb.writer._cursor == 0

    def test_transform_on_read_and_inv_on_write(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(4), transform=_AddOne())
        rb.extend(torch.tensor([10.0, 20.0]))
        assert rb.storage.get(torch.arange(2)).tolist() == [9.0, 19.0]
        assert rb[:].tolist() == [10.0, 20.0]

    def test_plain_function_transform_has_no_inverse(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(4), transform=lambda x: x * 2)
        rb.extend(torch.tensor([1.0, 2.0]))
        assert rb.storage.get(torch.arange(2)).tolist() == [1.0, 2.0]
        assert rb[:].tolist() == [2.0, 4.0]

    def test_append_and_insert_transform_order(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(4))
        rb.append_transform(lambda x: x * 2)
        rb.insert_transform(0, lambda x: x + 1)
        rb.extend(torch.tensor([1.0]))
        assert rb[:].tolist() == [4.0]

    def test_append_transform_invert_swaps_directions(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(4))
        rb.append_transform(_AddOne(), invert=True)
        rb.extend(torch.tensor([1.0]))
        assert rb.storage.get(torch.arange(1)).tolist() == [2.0]
        assert rb[:].tolist() == [1.0]

    def test_non_callable_transform_raises(self):
        with pytest.raises(TypeError, match="must be callable"):
            ReplayBuffer(transform=3)

    def test_custom_collate_fn(self):
        rb = ReplayBuffer(storage=ListStorage(4), collate_fn=len, batch_size=3)
        rb.extend(["a", "b"])
        assert rb.sample() == 3

    def test_iteration_stops_when_sampler_runs_out(self):
        rb = ReplayBuffer(
            storage=LazyTensorStorage(10), sampler=SamplerWithoutReplacement(), batch_size=2
        )
        rb.extend(torch.arange(6))
        seen = torch.cat(list(rb))
        assert sorted(seen.tolist()) == [0, 1, 2, 3, 4, 5]

    def test_iteration_without_batch_size_raises(self):
        with pytest.raises(RuntimeError, match="needs a batch_size"):
            next(iter(ReplayBuffer()))

    def test_prefetch_samples_in_threads(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(100), batch_size=8, prefetch=3)
        rb.extend(torch.arange(50))
        samples = [rb.sample() for _ in range(10)]
        assert all(s.shape == (8,) for s in samples)
        assert len(rb._futures) == 3

    def test_prefetch_zero_means_no_prefetching(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(100), batch_size=4, prefetch=0)
        rb.extend(torch.arange(10))
        assert rb.sample().shape == (4,) and rb.sample(6).shape == (6,)
        assert not rb._futures and rb._executor is None

    def test_prefetch_rejects_other_batch_size(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(100), batch_size=8, prefetch=2)
        rb.extend(torch.arange(50))
        with pytest.raises(ValueError, match="samples batches of 8, got batch_size=4"):
            rb.sample(4)

    def test_generator_makes_sampling_reproducible(self):
        def draw(seed):
            gen = torch.Generator().manual_seed(seed)
            rb = ReplayBuffer(storage=LazyTensorStorage(100), batch_size=16, generator=gen)
            rb.extend(torch.arange(100))
            return torch.cat([rb.sample() for _ in range(3)])

        assert torch.equal(draw(3), draw(3)) and not torch.equal(draw(3), draw(4))

    def test_concurrent_extend_and_sample(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(64), batch_size=32)
        rb.extend(_td(8))
        errors = []

        def write():
            try:
                for i in range(200):
                    rb.extend(_td(5, offset=i))
            except Exception as err:  # pragma: no cover - reported below
                errors.append(err)

        thread = threading.Thread(target=write)
        thread.start()
        for _ in range(200):
            sample = rb.sample()
            assert sample.batch_size == (32,)
        thread.join()
        assert errors == [] and len(rb) == 64

    def test_multi_dim_storage_extends_along_time(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(100, ndim=2), batch_size=64)
        for step in range(101):
            rb.extend(TensorDict({"step": torch.full((2, 1), step)}, [2, 1]))
        assert len(rb) == 100 and rb.dim_extend == 1
        stored = rb[:]["step"]
        assert stored.shape == (50, 2)
        assert stored[0].tolist() == [100, 100] and stored[1].tolist() == [51, 51]
        assert rb.sample().batch_size == (64,)

    def test_state_dict_round_trip(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=3)
        rb.extend(_td(4))
        other = ReplayBuffer(storage=LazyTensorStorage(10))
        other.load_state_dict(rb.state_dict())
        assert len(other) == 4 and other.batch_size == 3 and other.writer._cursor == 4
        assert torch.equal(other[:]["obs"], rb[:]["obs"])

    def test_repr_names_components(self):
        assert "LazyTensorStorage" in repr(ReplayBuffer(storage=LazyTensorStorage(3)))

    def test_given_container(self):
        rb = ReplayBuffer(storage=TensorStorage(torch.empty(10, 3, 4, 4, dtype=torch.uint8)))
        rb.add(torch.randint(255, (3, 4, 4), dtype=torch.uint8))
        assert len(rb) == 1 and rb[0].dtype == torch.uint8
