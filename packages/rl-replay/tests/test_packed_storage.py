"""Row-interleaved leaves of LazyTensorStorage behave like separate tensors."""

from __future__ import annotations

import pickle

import pytest
import torch
from tensordict import TensorDict

from rl_replay import LazyMemmapStorage, LazyTensorStorage
from rl_replay.storages._packed import packed_leaves


def _data(count, start=0):
    steps = torch.arange(start, start + count)
    return TensorDict(
        {
            "obs": steps.float().unsqueeze(-1).expand(count, 5).clone(),
            "scalar": steps.float() * 2,
            "empty": torch.zeros(count, 0),
            "pix": (steps % 255).to(torch.uint8).view(-1, 1, 1).expand(count, 3, 4).clone(),
            "flag": steps % 3 == 0,
            "next": {
                "obs": steps.float().unsqueeze(-1) + 0.5,
                "done": (steps % 2 == 0).unsqueeze(-1),
            },
        },
        [count],
    )


def _same(got, want):
    keys = sorted(want.keys(True, True), key=str)
    assert sorted(got.keys(True, True), key=str) == keys
    return all(torch.equal(got[k], want[k]) for k in keys)


def _leaves(storage):
    layout = storage._layout
    return dict(zip(layout.keys, layout.tensors, strict=True))


class TestPackedLeaves:
    def test_leaves_of_one_dtype_share_one_buffer(self):
        storage = LazyTensorStorage(16)
        storage.set(torch.arange(4), _data(4))
        leaves = _leaves(storage)
        floats = [leaves[k] for k in ("obs", "scalar", ("next", "obs"))]
        assert len({t.untyped_storage().data_ptr() for t in floats}) == 1
        assert leaves["pix"].shape == (16, 3, 4) and leaves["scalar"].shape == (16,)

    def test_memmap_storage_keeps_one_file_per_leaf(self):
        storage = LazyMemmapStorage(16)
        storage.set(torch.arange(4), _data(4))
        leaves = _leaves(storage)
        assert (
            leaves["obs"].untyped_storage().data_ptr()
            != leaves["scalar"].untyped_storage().data_ptr()
        )

    @pytest.mark.parametrize("ndim", [1, 2])
    def test_reads_match_a_storage_of_separate_tensors(self, ndim):
        packed, separate = LazyTensorStorage(64, ndim=ndim), LazyMemmapStorage(64, ndim=ndim)
        for start in range(0, 40, 8):
            chunk, rows = _data(8, start), torch.arange(start, start + 8)
            if ndim == 2:  # [time, env] rows of two environments
                chunk, rows = chunk.reshape(4, 2), torch.arange(start // 2, start // 2 + 4)
            packed.set(rows, chunk)
            separate.set(rows, chunk)
        index = packed._rand_given_ndim(50)
        got = packed.get(index)
        assert _same(got, separate.get(index))
        assert all(value.is_contiguous() for value in got.values(True, True))  # gathers copy
        assert _same(packed[:20], separate[:20])  # slices stay views of the storage

    def test_writes_to_one_leaf_leave_its_neighbours(self):
        storage = LazyTensorStorage(8)
        storage.set(torch.arange(8), _data(8))
        storage.set(torch.tensor([2, 5]), _data(2, 100))
        got = storage.get(torch.arange(8))
        expected = torch.cat(
            [_data(8)[:2], _data(1, 100), _data(8)[3:5], _data(1, 101), _data(8)[6:]]
        )
        assert _same(got, expected)

    def test_pickled_storage_keeps_its_data(self):
        storage = LazyTensorStorage(8)
        storage.set(torch.arange(8), _data(8))
        copy = pickle.loads(pickle.dumps(storage))
        assert _same(copy.get(torch.arange(8)), _data(8))

    def test_state_dict_round_trip(self):
        source, target = LazyTensorStorage(8), LazyTensorStorage(8)
        source.set(torch.arange(6), _data(6))
        target.load_state_dict(source.state_dict())
        assert _same(target[:6], _data(6))

    def test_packed_leaves_keeps_keys_and_shapes(self):
        specs = {
            "a": (torch.Size([3, 2]), torch.float),
            "b": (torch.Size([3, 0]), torch.float),
            "c": (torch.Size([3]), torch.long),
            "d": (torch.Size([3]), torch.float),
        }
        leaves = packed_leaves(specs, torch.Size([3]), lambda s, d: torch.zeros(s, dtype=d))
        assert list(leaves) == list(specs)
        assert {k: (v.shape, v.dtype) for k, v in leaves.items()} == specs

    @pytest.mark.parametrize("kind", ["flat", "nested", "pytree", "tensor"])
    def test_gather_fast_path_matches_the_general_read(self, kind):
        data = {
            "flat": TensorDict({"a": torch.arange(6.0), "b": torch.arange(6)}, [6]),
            "nested": _data(6),
            "pytree": {"a": torch.arange(6.0), "b": (torch.ones(6, 2),)},
            "tensor": torch.arange(12.0).view(6, 2),
        }[kind]
        storage = LazyTensorStorage(6)
        storage.set(torch.arange(6), data)
        fast, general = storage.get(torch.tensor([4, 0, 4])), storage.get([4, 0, 4])
        assert type(fast) is type(general)
        fast_leaves, general_leaves = (
            (
                list(x.values(True, True))
                if isinstance(x, TensorDict)
                else torch.utils._pytree.tree_leaves(x)
            )
            for x in (fast, general)
        )
        assert all(torch.equal(a, b) for a, b in zip(fast_leaves, general_leaves, strict=True))
