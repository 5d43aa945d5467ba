"""Checkpointers and buffer dumps/loads: formats, atomicity, corrupt files, no pickle."""

from __future__ import annotations

import json
import pickle
import shutil

import pytest
import torch
from tensordict import TensorDict

from rl_replay import (
    LazyMemmapStorage,
    LazyTensorStorage,
    ListStorage,
    ListStorageCheckpointer,
    ReplayBuffer,
    StorageCheckpointerBase,
    TensorDictReplayBuffer,
    TensorStorageCheckpointer,
)
from rl_replay.checkpointers._files import rewrite_json


def _td(count, offset=0):
    return TensorDict(
        {
            "obs": torch.arange(offset, offset + count).float(),
            ("next", "done"): torch.zeros(count, 1, dtype=torch.bool),
        },
        [count],
    )


def _data_file(directory, key):
    manifest = json.loads((directory / "manifest.json").read_text())
    return directory / next(e["file"] for e in manifest["entries"] if e["key"] == key)


@pytest.fixture
def no_pickle(monkeypatch):
    """Make every unpickling path raise: loading must not use them."""

    def forbidden(*args, **kwargs):
        raise AssertionError("pickle/torch.load must not be used when loading a checkpoint")

    monkeypatch.setattr(pickle, "load", forbidden)
    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(pickle, "Unpickler", forbidden)
    monkeypatch.setattr(torch, "load", forbidden)


class TestStorageCheckpointerBase:
    def test_is_abstract(self):
        with pytest.raises(TypeError, match="abstract"):
            StorageCheckpointerBase()

    def test_custom_checkpointer_is_used_by_storage(self, tmp_path):
        calls = []

        class Recorder(StorageCheckpointerBase):
            def dumps(self, storage, path):
                calls.append(("dumps", path))

            def loads(self, storage, path):
                calls.append(("loads", path))

        storage = LazyTensorStorage(4)
        storage.checkpointer = Recorder()
        storage.dumps(tmp_path)
        storage.loads(tmp_path)
        assert [name for name, _ in calls] == ["dumps", "loads"]


class TestTensorStorageCheckpointer:
    @pytest.mark.parametrize("storage_cls", [LazyTensorStorage, LazyMemmapStorage])
    @pytest.mark.parametrize(
        "data",
        [
            pytest.param(_td(5), id="tensordict"),
            pytest.param({"a": torch.randn(5), "b": (torch.ones(5, 2),)}, id="pytree"),
            pytest.param(torch.arange(5), id="tensor"),
        ],
    )
    def test_round_trip_into_fresh_and_initialised_storage(
        self, tmp_path, storage_cls, data, no_pickle
    ):
        storage = storage_cls(8)
        storage.set(torch.arange(5), data)
        storage.dumps(tmp_path / "ck")
        fresh = storage_cls(8)
        fresh.loads(tmp_path / "ck")
        used = storage_cls(8)
        used.set(torch.arange(5), data)
        used._empty()
        used.loads(tmp_path / "ck")
        for restored in (fresh, used):
            assert len(restored) == 5
            expected, found = storage.get(torch.arange(5)), restored.get(torch.arange(5))
            leaves = torch.utils._pytree.tree_leaves
            if isinstance(expected, TensorDict):
                assert (expected == found).all()
            else:
                assert all(
                    torch.equal(x, y) for x, y in zip(leaves(expected), leaves(found), strict=True)
                )

    def test_multi_dim_round_trip(self, tmp_path):
        storage = LazyMemmapStorage(100, ndim=2)
        storage.set(torch.arange(7), TensorDict({"a": torch.randn(7, 3)}, [7, 3]))
        storage.dumps(tmp_path)
        restored = LazyMemmapStorage(100, ndim=2)
        restored.loads(tmp_path)
        assert restored.max_size == 102 and restored.shape == (34, 3) and len(restored) == 21
        assert torch.equal(restored._get_entry("a"), storage._get_entry("a"))

    def test_uninitialised_storage_round_trip(self, tmp_path):
        LazyTensorStorage(4).dumps(tmp_path)
        restored = LazyTensorStorage(4)
        restored.loads(tmp_path)
        assert len(restored) == 0 and not restored.initialized

    def test_files_are_raw_tensors_and_json(self, tmp_path):
        storage = LazyTensorStorage(4)
        storage.set(torch.arange(2), _td(2))
        storage.dumps(tmp_path)
        meta = json.loads((tmp_path / "storage_metadata.json").read_text())
        assert meta["len"] == 2 and meta["shape"] == [4]
        manifest = json.loads((tmp_path / "storage" / "manifest.json").read_text())
        entry = next(e for e in manifest["entries"] if e["key"] == ["obs"])
        assert entry["dtype"] == "float32" and entry["shape"] == [2]
        assert entry["checksum"].startswith("crc32:")
        assert (tmp_path / "storage" / entry["file"]).stat().st_size == 8

    def test_missing_metadata_names_the_file(self, tmp_path):
        with pytest.raises(FileNotFoundError, match=r"storage_metadata\.json"):
            LazyTensorStorage(4).loads(tmp_path)

    def test_corrupt_metadata_names_the_file(self, tmp_path):
        (tmp_path / "storage_metadata.json").write_text("{not json")
        with pytest.raises(ValueError, match=r"could not parse .*storage_metadata\.json"):
            LazyTensorStorage(4).loads(tmp_path)

    def test_metadata_without_entries_raises(self, tmp_path):
        rewrite_json(tmp_path / "storage_metadata.json", {})
        with pytest.raises(ValueError, match="not a tensor storage checkpoint"):
            LazyTensorStorage(4).loads(tmp_path)

    def test_truncated_data_file_names_the_file(self, tmp_path):
        storage = LazyTensorStorage(64)
        storage.set(torch.arange(64), _td(64))
        storage.dumps(tmp_path)
        data_file = _data_file(tmp_path / "storage", ["obs"])
        data_file.write_bytes(data_file.read_bytes()[:10])
        with pytest.raises(
            ValueError, match=rf"{data_file.name} to hold 256 bytes .* found 10 bytes"
        ):
            LazyTensorStorage(64).loads(tmp_path)

    def test_missing_data_file_names_the_file(self, tmp_path):
        storage = LazyTensorStorage(4)
        storage.set(torch.arange(2), _td(2))
        storage.dumps(tmp_path)
        data_file = _data_file(tmp_path / "storage", ["next", "done"])
        data_file.unlink()
        with pytest.raises(FileNotFoundError, match=data_file.name):
            LazyTensorStorage(4).loads(tmp_path)

    def test_mismatched_capacity_raises_and_keeps_data(self, tmp_path):
        storage = LazyTensorStorage(4)
        storage.set(torch.arange(2), _td(2))
        storage.dumps(tmp_path)
        target = LazyTensorStorage(8)
        target.set(torch.arange(3), _td(3, offset=10))
        with pytest.raises(ValueError, match="same capacity"):
            target.loads(tmp_path)
        assert len(target) == 3 and target.get(0)["obs"].item() == 10.0


class TestListStorageCheckpointer:
    def test_round_trip_of_json_tensors_and_tensordicts(self, tmp_path, no_pickle):
        storage = ListStorage(10)
        items = ["text", 3, None, {"k": [1, 2]}, torch.arange(3), _td(2)]
        storage.set(torch.arange(len(items)), items)
        storage.dumps(tmp_path)
        restored = ListStorage(10)
        restored.loads(tmp_path)
        assert restored.get(slice(0, 4)) == items[:4]
        assert torch.equal(restored.get(4), items[4])
        assert (restored.get(5) == items[5]).all()

    def test_is_the_default_of_list_storage(self):
        assert isinstance(ListStorage().checkpointer, ListStorageCheckpointer)
        assert isinstance(LazyTensorStorage(3).checkpointer, TensorStorageCheckpointer)

    def test_object_needing_pickle_is_refused(self, tmp_path):
        storage = ListStorage(4)
        storage.set(torch.arange(2), ["ok", object()])
        with pytest.raises(TypeError, match="item 1 is a object, which would need pickle"):
            storage.dumps(tmp_path)

    def test_missing_tensor_dir_raises(self, tmp_path):
        storage = ListStorage(4)
        storage.set(0, torch.ones(2))
        storage.dumps(tmp_path)
        shutil.rmtree(tmp_path / "tensors")
        with pytest.raises(FileNotFoundError, match="tensors"):
            ListStorage(4).loads(tmp_path)

    def test_malformed_metadata_raises(self, tmp_path):
        rewrite_json(tmp_path / "storage_metadata.json", {"items": 3})
        with pytest.raises(ValueError, match="list of items"):
            ListStorage(4).loads(tmp_path)


class TestBufferCheckpoint:
    def _buffer(self):
        return TensorDictReplayBuffer(storage=LazyMemmapStorage(10), batch_size=4)

    def test_round_trip_without_pickle(self, tmp_path, no_pickle):
        rb = self._buffer()
        rb.extend(_td(6))
        rb.dumps(tmp_path / "ck")
        restored = self._buffer()
        restored.loads(tmp_path / "ck")
        assert len(restored) == 6 and restored.writer._cursor == 6
        assert torch.equal(restored[:]["obs"], rb[:]["obs"])

    def test_layout_pointer_and_snapshot(self, tmp_path):
        rb = self._buffer()
        rb.extend(_td(2))
        rb.dumps(tmp_path / "ck")
        pointer = json.loads((tmp_path / "ck" / "CURRENT").read_text())
        names = sorted(p.name for p in (tmp_path / "ck").iterdir())
        assert names == ["CURRENT", pointer["snapshot"]]
        snapshot = tmp_path / "ck" / pointer["snapshot"]
        assert sorted(p.name for p in snapshot.iterdir()) == [
            "buffer_metadata.json",
            "sampler",
            "storage",
            "writer",
        ]
        assert [p.name for p in tmp_path.iterdir()] == ["ck"]

    def test_crash_mid_dump_keeps_previous_checkpoint(self, tmp_path, monkeypatch):
        rb = self._buffer()
        rb.extend(_td(3))
        rb.dumps(tmp_path / "ck")
        rb.extend(_td(4, offset=100))

        def crash(path):
            raise OSError("disk full")

        monkeypatch.setattr(rb.writer, "dumps", crash)
        with pytest.raises(OSError, match="disk full"):
            rb.dumps(tmp_path / "ck")
        assert [p.name for p in tmp_path.iterdir()] == ["ck"]
        assert len(list((tmp_path / "ck").iterdir())) == 2  # the failed snapshot is gone
        restored = self._buffer()
        restored.loads(tmp_path / "ck")
        assert len(restored) == 3 and restored[:]["obs"].tolist() == [0.0, 1.0, 2.0]

    def test_dump_replaces_previous_checkpoint(self, tmp_path):
        rb = self._buffer()
        rb.extend(_td(3))
        rb.dumps(tmp_path / "ck")
        rb.extend(_td(2, offset=10))
        rb.dumps(tmp_path / "ck")
        restored = self._buffer()
        restored.loads(tmp_path / "ck")
        assert len(restored) == 5

    def test_incomplete_checkpoint_raises(self, tmp_path):
        rb = self._buffer()
        rb.extend(_td(3))
        rb.dumps(tmp_path / "ck")
        (tmp_path / "ck" / "CURRENT").unlink()
        with pytest.raises(FileNotFoundError, match="No dump into it finished"):
            self._buffer().loads(tmp_path / "ck")

    def test_missing_checkpoint_raises(self, tmp_path):
        with pytest.raises(FileNotFoundError, match="expected a checkpoint directory"):
            self._buffer().loads(tmp_path / "nowhere")

    def test_missing_component_names_the_file(self, tmp_path):
        rb = self._buffer()
        rb.extend(_td(3))
        rb.dumps(tmp_path / "ck")
        (meta,) = (tmp_path / "ck").glob("snapshot-*/writer/*.json")
        meta.unlink()
        with pytest.raises(FileNotFoundError, match=meta.name):
            self._buffer().loads(tmp_path / "ck")

    def test_list_storage_buffer_round_trip(self, tmp_path):
        rb = ReplayBuffer(storage=ListStorage(5))
        rb.extend(["a", "b", 3])
        rb.dumps(tmp_path / "ck")
        restored = ReplayBuffer(storage=ListStorage(5))
        restored.loads(tmp_path / "ck")
        assert restored[:] == ["a", "b", 3]
