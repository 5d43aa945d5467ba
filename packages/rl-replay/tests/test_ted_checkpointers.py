"""Flat, nested and H5 checkpointers: exact round trips of TED data, compaction, errors."""

from __future__ import annotations

import importlib
import importlib.util
import json
import pickle

import pytest
import torch
from tensordict import TensorDict

from rl_replay import (
    FlatStorageCheckpointer,
    H5StorageCheckpointer,
    LazyMemmapStorage,
    LazyTensorStorage,
    NestedStorageCheckpointer,
    ReplayBuffer,
    TensorStorageCheckpointer,
)
from rl_replay.checkpointers._files import read_tensordict, write_tensordict

needs_h5py = pytest.mark.skipif(
    importlib.util.find_spec("h5py") is None, reason="needs h5py: pip install 'rl-replay[h5]'"
)
CHECKPOINTERS = [
    pytest.param(FlatStorageCheckpointer, id="flat"),
    pytest.param(NestedStorageCheckpointer, id="nested"),
    pytest.param(H5StorageCheckpointer, id="h5", marks=needs_h5py),
]


def _rollout(num_envs, steps, start=0, episode_len=4):
    """TED data [num_envs, steps]: next obs = obs of the following step except at episode ends."""
    t = torch.arange(start, start + steps).expand(num_envs, steps)
    env = torch.arange(num_envs).unsqueeze(-1).expand(num_envs, steps)
    obs = (env * 1000 + t).float()
    done = ((t + 1) % episode_len == 0).unsqueeze(-1)
    next_obs = torch.where(
        done.squeeze(-1), -obs, obs + 1
    )  # reset: next obs is not the next root obs
    return TensorDict(
        {
            "obs": obs.unsqueeze(-1),
            "action": torch.randn(num_envs, steps, 2),
            "next": {
                "obs": next_obs.unsqueeze(-1),
                "reward": torch.randn(num_envs, steps, 1),
                "done": done,
            },
        },
        [num_envs, steps],
    )


def _assert_same(storage, restored):
    assert len(restored) == len(storage) and restored.shape == storage.shape
    rows = storage._len_along_dim0
    assert (restored._storage[:rows] == storage._storage[:rows]).all()


@pytest.mark.parametrize("checkpointer", CHECKPOINTERS)
class TestTedCheckpointers:
    def test_round_trip_one_dim_with_wrap_around(self, tmp_path, checkpointer):
        storage = LazyTensorStorage(10)
        rb = ReplayBuffer(storage=storage)
        rb.extend(_rollout(1, 7)[0])
        rb.extend(_rollout(1, 6, start=7)[0])  # wraps: 13 steps into 10 slots
        storage.checkpointer = checkpointer()
        storage.dumps(tmp_path)
        restored = LazyTensorStorage(10)
        restored.checkpointer = checkpointer()
        restored.loads(tmp_path)
        _assert_same(storage, restored)

    def test_round_trip_of_a_full_storage_of_one_episode_without_end(self, tmp_path, checkpointer):
        # a done key that is never set: its table of ends holds empty tensors
        data = _rollout(1, 10, episode_len=100)[0]
        data["next", "terminated"] = torch.zeros(10, 1, dtype=torch.bool)
        data["next", "truncated"] = torch.zeros(10, 1, dtype=torch.bool)
        data["next", "truncated"][-1] = True
        storage = LazyMemmapStorage(10)
        ReplayBuffer(storage=storage).extend(data)
        storage.checkpointer = checkpointer()
        storage.dumps(tmp_path)
        restored = LazyMemmapStorage(10)
        restored.checkpointer = checkpointer()
        restored.loads(tmp_path)
        _assert_same(storage, restored)

    def test_round_trip_multi_dim_partially_filled(self, tmp_path, checkpointer):
        storage = LazyMemmapStorage(100, ndim=2)
        rb = ReplayBuffer(storage=storage)
        rb.extend(_rollout(3, 7))
        storage.checkpointer = checkpointer()
        storage.dumps(tmp_path)
        restored = LazyMemmapStorage(100, ndim=2)
        restored.checkpointer = checkpointer()
        restored.loads(tmp_path)
        assert restored.max_size == 102
        _assert_same(storage, restored)

    def test_round_trip_is_exact_when_done_flags_lie(self, tmp_path, checkpointer):
        data = _rollout(1, 8)[0]
        data["next", "done"].zero_()  # resets without done flags
        storage = LazyTensorStorage(8)
        storage.set(torch.arange(8), data)
        storage.checkpointer = checkpointer()
        storage.dumps(tmp_path)
        restored = LazyTensorStorage(8)
        restored.checkpointer = checkpointer()
        restored.loads(tmp_path)
        _assert_same(storage, restored)

    def test_uninitialised_storage_round_trip(self, tmp_path, checkpointer):
        storage = LazyTensorStorage(4)
        storage.checkpointer = checkpointer()
        storage.dumps(tmp_path)
        restored = LazyTensorStorage(4)
        restored.checkpointer = checkpointer()
        restored.loads(tmp_path)
        assert len(restored) == 0

    def test_loading_other_format_raises(self, tmp_path, checkpointer):
        storage = LazyTensorStorage(4)
        storage.set(torch.arange(2), _rollout(1, 2)[0])
        storage.dumps(tmp_path)  # default TensorStorageCheckpointer
        restored = LazyTensorStorage(4)
        restored.checkpointer = checkpointer()
        with pytest.raises(ValueError, match=r"checkpoint in .*storage_metadata\.json"):
            restored.loads(tmp_path)

    def test_loading_never_unpickles(self, tmp_path, checkpointer, monkeypatch):
        storage = LazyTensorStorage(6)
        storage.set(torch.arange(6), _rollout(1, 6)[0])
        storage.checkpointer = checkpointer()
        storage.dumps(tmp_path)

        def forbidden(*args, **kwargs):
            raise AssertionError("no pickle when loading")

        monkeypatch.setattr(pickle, "load", forbidden)
        monkeypatch.setattr(pickle, "loads", forbidden)
        monkeypatch.setattr(torch, "load", forbidden)
        restored = LazyTensorStorage(6)
        restored.checkpointer = checkpointer()
        restored.loads(tmp_path)
        _assert_same(storage, restored)


class TestFlatStorageCheckpointer:
    def test_only_trajectory_ends_of_next_obs_are_saved(self, tmp_path):
        storage = LazyTensorStorage(12)
        storage.set(torch.arange(12), _rollout(1, 12)[0])
        storage.checkpointer = FlatStorageCheckpointer()
        storage.dumps(tmp_path)
        assert ["next", "obs"] not in _saved_keys(tmp_path / "storage")
        saved_index = read_tensordict(tmp_path / "ends", "Test")["0_index"]
        assert saved_index.tolist() == [
            3,
            7,
            11,
        ]  # the three episode ends (the last is also the newest)
        assert ["next", "reward"] in _saved_keys(tmp_path / "storage")

    def test_custom_done_and_reward_keys(self):
        checkpointer = FlatStorageCheckpointer(done_keys=[("agent", "done")], reward_keys=["r"])
        assert checkpointer.done_keys == [("agent", "done")] and checkpointer.reward_keys == [
            ("r",)
        ]

    def test_is_smaller_than_the_plain_checkpoint(self, tmp_path):
        storage = LazyTensorStorage(400)
        big = _rollout(1, 400, episode_len=100)[0]
        big["obs"] = big["obs"].expand(400, 64).clone()
        big["next", "obs"] = big["next", "obs"].expand(400, 64).clone()
        storage.set(torch.arange(400), big)

        def size(checkpointer, path):
            storage.checkpointer = checkpointer
            storage.dumps(path)
            return sum(f.stat().st_size for f in path.rglob("*.bin"))

        assert size(FlatStorageCheckpointer(), tmp_path / "flat") < 0.6 * size(
            TensorStorageCheckpointer(), tmp_path / "plain"
        )


class TestNestedStorageCheckpointer:
    def test_one_nested_item_per_trajectory(self, tmp_path):
        storage = LazyTensorStorage(12)
        storage.set(torch.arange(10), _rollout(1, 10)[0])
        storage.checkpointer = NestedStorageCheckpointer()
        storage.dumps(tmp_path)
        saved = read_tensordict(tmp_path / "storage", "Test")
        assert saved.batch_size == (3,)  # episodes of 4, 4 and the unfinished 2
        assert [t.shape[0] for t in saved["obs"].unbind(0)] == [4, 4, 2]


@needs_h5py
class TestH5StorageCheckpointer:
    def test_seed_example_dumps_and_loads_every_iteration(self, tmp_path):
        rb = ReplayBuffer(storage=LazyMemmapStorage(100, ndim=2))
        rb_test = ReplayBuffer(storage=LazyMemmapStorage(100, ndim=2))
        rb.storage.checkpointer = H5StorageCheckpointer()
        rb_test.storage.checkpointer = H5StorageCheckpointer()
        for i in range(5):
            rb.extend(_rollout(3, 7, start=7 * i))
            assert rb._storage.max_size == 102
            rb.dumps(tmp_path)
            rb_test.loads(tmp_path)
            assert (rb_test[:] == rb[:]).all()

    def test_file_name_and_compression(self, tmp_path):
        storage = LazyTensorStorage(8)
        storage.set(torch.arange(8), _rollout(1, 8)[0])
        storage.checkpointer = H5StorageCheckpointer(
            checkpoint_file="data.h5", h5_kwargs={"compression": "gzip"}
        )
        storage.dumps(tmp_path)
        with H5StorageCheckpointer()._h5py.File(tmp_path / "data.h5") as file:
            assert file["storage/obs"].compression == "gzip"

    def test_missing_h5py_names_the_extra(self, monkeypatch):
        real_import = importlib.import_module

        def no_h5py(name, *args):
            if name == "h5py":
                raise ImportError("No module named 'h5py'")
            return real_import(name, *args)

        monkeypatch.setattr(importlib, "import_module", no_h5py)
        with pytest.raises(ImportError, match=r"pip install 'rl-replay\[h5\]'"):
            H5StorageCheckpointer()

    def test_missing_file_raises(self, tmp_path):
        storage = LazyTensorStorage(8)
        storage.set(torch.arange(8), _rollout(1, 8)[0])
        storage.checkpointer = H5StorageCheckpointer()
        storage.dumps(tmp_path)
        (tmp_path / "checkpoint.h5").unlink()
        with pytest.raises(FileNotFoundError, match=r"checkpoint\.h5"):
            storage.loads(tmp_path)

    def test_truncated_file_raises(self, tmp_path):
        storage = LazyTensorStorage(8)
        storage.set(torch.arange(8), _rollout(1, 8)[0])
        storage.checkpointer = H5StorageCheckpointer()
        storage.dumps(tmp_path)
        path = tmp_path / "checkpoint.h5"
        path.write_bytes(path.read_bytes()[:100])
        with pytest.raises(ValueError, match="truncated or corrupt"):
            storage.loads(tmp_path)


def test_tensor_dir_with_an_empty_tensor_loads(tmp_path):
    write_tensordict(
        tmp_path / "t", {"ends": torch.zeros(0, dtype=torch.int64), "x": torch.ones(2)}, "Test"
    )
    loaded = read_tensordict(tmp_path / "t", "Test")
    assert loaded["ends"].shape == (0,) and loaded["x"].tolist() == [1.0, 1.0]


def _saved_keys(path):
    return [entry["key"] for entry in json.loads((path / "manifest.json").read_text())["entries"]]
