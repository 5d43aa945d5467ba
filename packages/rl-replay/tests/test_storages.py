"""Storages: the shared contract, then each storage's own behaviour and bad input."""

from __future__ import annotations

import gc
import pickle

import pytest
import torch
from tensordict import MemoryMappedTensor, TensorDict

from rl_replay import (
    LazyMemmapStorage,
    LazyTensorStorage,
    ListStorage,
    Storage,
    TensorStorage,
)
from rl_replay.testing import StorageContract


def _td(count: int, offset: int = 0) -> TensorDict:
    base = torch.arange(offset, offset + count)
    return TensorDict(
        {"obs": base.float().unsqueeze(-1).expand(count, 3).clone(), "nested": {"r": base}},
        [count],
    )


class TestStorage:
    def test_is_abstract(self):
        with pytest.raises(TypeError, match="abstract"):
            Storage(4)

    @pytest.mark.parametrize("max_size", [0, -3, 2.5, True, "10"])
    def test_rejects_bad_max_size(self, max_size):
        with pytest.raises(ValueError, match="positive int"):
            LazyTensorStorage(max_size)

    def test_dumps_without_checkpointer_names_the_fix(self, tmp_path):
        storage = LazyTensorStorage(4)
        storage.checkpointer = None
        with pytest.raises(RuntimeError, match="needs a checkpointer"):
            storage.dumps(tmp_path)

    def test_attach_registers_once_and_empty_notifies(self):
        calls = []

        class Entity:
            def _empty(self):
                calls.append(1)

        storage = ListStorage(4)
        entity = Entity()
        storage.attach(entity)
        storage.attach(entity)
        storage.set(0, "x")
        storage.empty()
        assert calls == [1] and len(storage) == 0

    def test_rand_given_ndim_on_empty_storage_raises(self):
        with pytest.raises(RuntimeError, match="empty"):
            LazyTensorStorage(4)._rand_given_ndim(2)

    def test_rand_given_ndim_returns_tuple_for_multi_dim(self):
        storage = LazyTensorStorage(12, ndim=2)
        storage.set(torch.arange(2), torch.zeros(2, 3))
        index = storage._rand_given_ndim(5)
        assert isinstance(index, tuple) and len(index) == 2
        assert bool((index[0] < 2).all()) and bool((index[1] < 3).all())


class TestListStorage(StorageContract):
    def make_storage(self, max_size):
        return ListStorage(max_size)

    def make_data(self, count, offset=0):
        return [{"value": offset + i} for i in range(count)]

    def test_holds_arbitrary_objects(self):
        storage = ListStorage()
        storage.set(torch.arange(3), ["a", None, 3.5])
        assert storage.get(1) is None and storage.get(slice(0, 3)) == ["a", None, 3.5]

    def test_unbounded_by_default(self):
        assert ListStorage().max_size > 10**9

    def test_write_with_a_gap_raises_before_writing(self):
        storage = ListStorage(10)
        storage.set(0, "a")
        with pytest.raises(ValueError, match="without gaps"):
            storage.set(torch.tensor([1, 3]), ["b", "c"])
        assert len(storage) == 1

    def test_positions_in_any_order_fill_the_block(self):
        storage = ListStorage(3)
        storage.set(torch.tensor([2, 0, 1]), ["c", "a", "b"])
        assert storage.get(slice(0, 3)) == ["a", "b", "c"]

    def test_position_beyond_capacity_raises_before_writing(self):
        storage = ListStorage(3)
        with pytest.raises(ValueError, match=r"positions in \[0, max_size=3\), got 3"):
            storage.set(torch.tensor([0, 1, 2, 3]), ["a", "b", "c", "d"])
        assert len(storage) == 0

    @pytest.mark.parametrize("count", [5, 7])
    def test_buffer_extend_longer_than_capacity_keeps_the_last_items(self, count):
        from rl_replay import ReplayBuffer

        rb = ReplayBuffer(storage=ListStorage(3))
        rb.extend(list(range(count)))
        assert len(rb) == 3 and sorted(rb[:]) == list(range(count - 3, count))
        rb.extend(["x"])  # the cursor continues after the last item written
        assert sorted(map(str, rb[:])) == sorted(map(str, [count - 2, count - 1, "x"]))

    def test_count_mismatch_raises(self):
        with pytest.raises(ValueError, match="expected 2 items"):
            ListStorage(4).set(torch.arange(2), ["a"])

    def test_int_write_with_a_gap_raises(self):
        with pytest.raises(ValueError, match=r"positions 0\.\.0, got 2"):
            ListStorage(4).set(2, "a")


class TestTensorStorage(StorageContract):
    def make_storage(self, max_size):
        return TensorStorage(_td(max_size).zero_())

    def make_data(self, count, offset=0):
        return _td(count, offset)

    def test_plain_tensor_container_keeps_tensor_type(self):
        storage = TensorStorage(torch.zeros(5, 2))
        storage.set(torch.arange(2), torch.ones(2, 2))
        out = storage.get(torch.tensor([0, 1]))
        assert isinstance(out, torch.Tensor) and out.shape == (2, 2)

    def test_max_size_defaults_to_container_length(self):
        assert TensorStorage(torch.zeros(7, 2)).max_size == 7

    @pytest.mark.parametrize("ndim", [0, -1, 1.5])
    def test_rejects_bad_ndim(self, ndim):
        with pytest.raises(ValueError, match="ndim"):
            TensorStorage(torch.zeros(4), ndim=ndim)

    def test_container_with_too_few_dims_raises(self):
        with pytest.raises(ValueError, match="at least 2 dims"):
            TensorStorage(torch.zeros(4), ndim=2)

    def test_range_cursor_writes_and_counts_the_rows(self):
        storage = LazyTensorStorage(8)
        storage.set(range(5), TensorDict({"a": torch.arange(5)}, [5]))
        assert len(storage) == 5 and storage.get(torch.arange(5))["a"].tolist() == [0, 1, 2, 3, 4]

    def test_len_along_dim0_counts_rows_of_the_cursor_dim(self):
        storage = LazyTensorStorage(10, ndim=2)
        storage.set(range(3), TensorDict({"a": torch.zeros(3, 2)}, [3, 2]))
        assert len(storage) == 6 and storage.len_along_dim0 == 3

    def test_container_without_entries_allocates_them_on_first_write(self):
        storage = TensorStorage(TensorDict(batch_size=[5]))
        assert storage.max_size == 5 and len(storage) == 0
        storage.set(torch.arange(2), TensorDict({"a": torch.ones(2, 3)}, [2]))
        assert storage.shape == (5,) and storage.get(torch.arange(2))["a"].shape == (2, 3)

    def test_get_entry_returns_the_stored_tensor(self):
        storage = self.make_storage(4)
        storage.set(torch.arange(4), _td(4))
        assert storage._get_entry(("nested", "r")).tolist() == [0, 1, 2, 3]
        assert storage._get_entry("obs", torch.tensor([1])).shape == (1, 3)

    def test_get_entry_unknown_key_lists_keys(self):
        storage = self.make_storage(4)
        with pytest.raises(KeyError, match="Stored keys"):
            storage._get_entry("missing")


class TestLazyTensorStorage(StorageContract):
    def make_storage(self, max_size):
        return LazyTensorStorage(max_size)

    def make_data(self, count, offset=0):
        return _td(count, offset)

    def test_allocates_on_first_write(self):
        storage = LazyTensorStorage(6)
        assert not storage.initialized
        storage.set(torch.arange(2), _td(2))
        assert storage.initialized and storage.shape == (6,)
        assert storage._get_entry("obs").shape == (6, 3)

    @pytest.mark.parametrize("dtype", [torch.float32, torch.bool, torch.bfloat16])
    def test_large_cpu_storage_on_huge_pages_is_usable(self, dtype):
        storage = LazyTensorStorage(
            300_000
        )  # 300k x 8 elements: above the 2 MiB huge-page threshold
        storage.set(torch.arange(2), TensorDict({"x": torch.ones(2, 8, dtype=dtype)}, [2]))
        entry = storage._get_entry("x")
        assert entry.shape == (300_000, 8) and entry.dtype == dtype and entry.is_contiguous()
        storage.set(torch.tensor([299_999]), TensorDict({"x": torch.ones(1, 8, dtype=dtype)}, [1]))
        assert bool(storage.get(torch.tensor([0, 299_999]))["x"].all())
        assert pickle.loads(pickle.dumps(storage)).get(1)["x"].dtype == dtype

    def test_get_before_any_write_raises(self):
        with pytest.raises(RuntimeError, match="expected at least one write"):
            LazyTensorStorage(4).get(0)

    def test_pytree_round_trip(self):
        storage = LazyTensorStorage(5)
        tree = {"a": {"b": torch.randn(3), "c": [torch.zeros(3, 2), (torch.ones(3, 10),)]}}
        storage.set(torch.arange(3), tree)
        out = storage.get(torch.tensor([0, 2]))
        assert isinstance(out["a"]["c"][1], tuple)
        assert out["a"]["c"][1][0].shape == (2, 10)
        assert torch.equal(out["a"]["b"], tree["a"]["b"][[0, 2]])

    def test_pytree_leaves_with_different_leading_dims_raise(self):
        with pytest.raises(ValueError, match="share their leading dims"):
            LazyTensorStorage(5).set(torch.arange(3), (torch.zeros(3), torch.zeros(2)))

    def test_non_tensor_leaf_raises(self):
        with pytest.raises(TypeError, match="ListStorage"):
            LazyTensorStorage(5).set(torch.arange(1), ["text"])

    @pytest.mark.parametrize(
        ("bad", "error", "match"),
        [
            (TensorDict({"obs": torch.zeros(2, 3)}, [2]), KeyError, "expected the keys"),
            (
                TensorDict(
                    {
                        "obs": torch.zeros(2, 3),
                        "nested": {"r": torch.zeros(2)},
                        "x": torch.zeros(2),
                    },
                    [2],
                ),
                KeyError,
                "expected the keys",
            ),
            (
                TensorDict({"obs": torch.zeros(2, 4), "nested": {"r": torch.zeros(2)}}, [2]),
                ValueError,
                r"expected entry 'obs' of shape \(2, 3\).*found \(2, 4\)",
            ),
            (
                TensorDict({"obs": torch.zeros(2, 3), "other": {"r": torch.zeros(2)}}, [2]),
                KeyError,
                "no entry",
            ),
            ({"obs": torch.zeros(2, 3)}, ValueError, "structure"),
        ],
    )
    def test_bad_write_raises_and_leaves_data_intact(self, bad, error, match):
        storage = LazyTensorStorage(4)
        storage.set(torch.arange(2), _td(2, offset=5))
        with pytest.raises(error, match=match):
            storage.set(torch.arange(2), bad)
        assert len(storage) == 2
        assert storage.get(torch.arange(2))["obs"][:, 0].tolist() == [5.0, 6.0]
        assert storage.get(torch.arange(2))["nested", "r"].tolist() == [5, 6]

    def test_data_with_fewer_dims_than_ndim_raises(self):
        with pytest.raises(ValueError, match=r"ndim=2\) expected data with at least 2 batch dims"):
            LazyTensorStorage(10, ndim=2).set(
                torch.arange(3), TensorDict({"a": torch.zeros(3)}, [3])
            )

    def test_ndim_two_rounds_capacity_up_and_counts_all_elements(self):
        storage = LazyTensorStorage(100, ndim=2)
        storage.set(torch.arange(7), TensorDict({"a": torch.zeros(7, 3)}, [7, 3]))
        assert storage.max_size == 102 and storage.shape == (34, 3)
        assert len(storage) == 21 and storage._len_along_dim0 == 7

    def test_ndim_two_accepts_tuple_indices(self):
        storage = LazyTensorStorage(6, ndim=2)
        storage.set(torch.arange(3), torch.arange(6).reshape(3, 2))
        out = storage.get((torch.tensor([2, 0]), torch.tensor([1, 0])))
        assert out.tolist() == [5, 0]

    def test_int_cursor_writes_one_element(self):
        storage = LazyTensorStorage(3)
        storage.set(1, TensorDict({"a": torch.tensor(4.0)}, []))
        assert len(storage) == 2 and storage.get(1)["a"].item() == 4.0

    def test_state_dict_into_storage_of_other_shape_raises(self):
        source = LazyTensorStorage(4)
        source.set(torch.arange(2), _td(2))
        target = LazyTensorStorage(8)
        target.set(torch.arange(1), _td(1))
        with pytest.raises(
            ValueError, match=r"has shape \(8,\) but the saved state has shape \(4,\)"
        ):
            target.load_state_dict(source.state_dict())

    def test_state_dict_with_other_ndim_raises(self):
        source = LazyTensorStorage(4)
        source.set(torch.arange(2), _td(2))
        with pytest.raises(ValueError, match="ndim=2 but the saved state has ndim=1"):
            LazyTensorStorage(4, ndim=2).load_state_dict(source.state_dict())

    def test_pickle_keeps_layout(self):
        storage = LazyTensorStorage(4)
        storage.set(torch.arange(2), {"x": torch.ones(2)})
        clone = pickle.loads(pickle.dumps(storage))
        assert len(clone) == 2 and clone.get(torch.tensor([1]))["x"].tolist() == [1.0]


class TestLazyMemmapStorage(StorageContract):
    def make_storage(self, max_size):
        return LazyMemmapStorage(max_size)

    def make_data(self, count, offset=0):
        return _td(count, offset)

    def test_files_live_in_scratch_dir(self, tmp_path):
        storage = LazyMemmapStorage(4, scratch_dir=tmp_path)
        storage.set(torch.arange(2), _td(2))
        assert (tmp_path / "obs.memmap").is_file()
        assert (tmp_path / "nested" / "r.memmap").is_file()
        assert isinstance(storage._storage.get("obs"), MemoryMappedTensor)

    def test_existing_files_need_existsok(self, tmp_path):
        LazyMemmapStorage(4, scratch_dir=tmp_path).set(torch.arange(2), _td(2))
        with pytest.raises(RuntimeError, match="existsok=True"):
            LazyMemmapStorage(4, scratch_dir=tmp_path).set(torch.arange(2), _td(2))
        storage = LazyMemmapStorage(4, scratch_dir=tmp_path, existsok=True)
        storage.set(torch.arange(2), _td(2))
        assert len(storage) == 2

    def test_temporary_scratch_dir_is_removed_with_the_storage(self):
        storage = LazyMemmapStorage(4)
        storage.set(torch.arange(2), _td(2))
        scratch = storage.scratch_dir
        assert scratch.is_dir()
        del storage
        gc.collect()
        assert not scratch.exists()

    def test_given_scratch_dir_is_kept(self, tmp_path):
        storage = LazyMemmapStorage(4, scratch_dir=tmp_path / "keep")
        storage.set(torch.arange(2), _td(2))
        del storage
        gc.collect()
        assert (tmp_path / "keep" / "obs.memmap").is_file()

    def test_pickle_shares_the_files(self):
        storage = LazyMemmapStorage(4)
        storage.set(torch.arange(2), _td(2))
        clone = pickle.loads(pickle.dumps(storage))
        clone.set(torch.tensor([2]), _td(1, offset=9))
        assert storage.get(2)["nested", "r"].item() == 9
