"""Damaged checkpoints are errors naming the file, never data; failed loads change nothing."""

from __future__ import annotations

import importlib.util
import json
import os
import zlib
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

from rl_replay import (
    H5StorageCheckpointer,
    LazyMemmapStorage,
    LazyTensorStorage,
    ListStorage,
    PrioritizedSampler,
    ReplayBuffer,
    RoundRobinWriter,
    TensorDictMaxValueWriter,
    TensorDictReplayBuffer,
)
from rl_replay.checkpointers import _files
from rl_replay.checkpointers._files import rewrite_json

needs_h5py = pytest.mark.skipif(
    importlib.util.find_spec("h5py") is None, reason="needs h5py: pip install 'rl-replay[h5]'"
)


def _td(count: int, offset: int = 0) -> TensorDict:
    return TensorDict(
        {"obs": torch.arange(offset, offset + count).float(), "act": torch.ones(count, 2)},
        [count],
    )


def _edit(path: Path, **changes) -> None:
    """Change entries of a checksummed JSON file and fix its checksum (a consistent edit)."""
    content = json.loads(path.read_text())
    content.update(changes)
    rewrite_json(path, content)


def _entry(directory: Path, key: list[str]) -> dict:
    manifest = json.loads((directory / "manifest.json").read_text())
    return next(e for e in manifest["entries"] if e["key"] == key)


def _buffer(sampler=None, writer=None):
    return TensorDictReplayBuffer(
        storage=LazyTensorStorage(10), sampler=sampler, writer=writer, batch_size=2
    )


def _snapshot(path: Path) -> Path:
    return path / json.loads((path / "CURRENT").read_text())["snapshot"]


class TestStorageMetadata:
    @pytest.fixture
    def dumped(self, tmp_path):
        storage = LazyTensorStorage(10)
        storage.set(torch.arange(4), _td(4))
        storage.dumps(tmp_path)
        return tmp_path

    @pytest.mark.parametrize("length", [5, -1, 2.5, True, "3"])
    def test_bad_len_is_refused(self, dumped, length):
        _edit(dumped / "storage_metadata.json", len=length)
        with pytest.raises(ValueError, match=r"len .*storage_metadata\.json"):
            LazyTensorStorage(10).loads(dumped)

    @pytest.mark.parametrize("shape", [[3], [0], [-10], [10, 1], "10"])
    def test_bad_shape_is_refused(self, dumped, shape):
        _edit(dumped / "storage_metadata.json", shape=shape)
        with pytest.raises(ValueError, match=r"storage_metadata\.json"):
            LazyTensorStorage(10).loads(dumped)

    def test_shape_disagreeing_with_max_size_is_refused(self, dumped):
        _edit(dumped / "storage_metadata.json", shape=[1000])
        with pytest.raises(ValueError, match="max_size=1000"):
            LazyTensorStorage(10).loads(dumped)

    def test_unchecked_edit_fails_the_checksum(self, dumped):
        meta = dumped / "storage_metadata.json"
        meta.write_text(meta.read_text().replace('"len": 4', '"len": 3'))
        with pytest.raises(ValueError, match=r"checksum mismatch in .*storage_metadata\.json"):
            LazyTensorStorage(10).loads(dumped)

    def test_binary_garbage_names_the_file(self, dumped):
        (dumped / "storage_metadata.json").write_bytes(b"\xff\xfe\x00garbage\x80")
        with pytest.raises(ValueError, match=r"could not parse .*storage_metadata\.json"):
            LazyTensorStorage(10).loads(dumped)


class TestTensorFiles:
    @pytest.fixture
    def dumped(self, tmp_path):
        storage = LazyMemmapStorage(10)
        storage.set(torch.arange(4), _td(4))
        storage.dumps(tmp_path)
        return tmp_path

    def test_dtype_edited_to_same_size_is_refused(self, dumped):
        manifest = dumped / "storage" / "manifest.json"
        content = json.loads(manifest.read_text())
        (entry,) = [e for e in content["entries"] if e["key"] == ["obs"]]
        entry["dtype"] = "int32"
        rewrite_json(manifest, content)
        with pytest.raises(ValueError, match=rf"checksum mismatch in .*{entry['file']}"):
            LazyMemmapStorage(10).loads(dumped)

    def test_same_size_garbage_is_refused(self, dumped):
        data_file = dumped / "storage" / _entry(dumped / "storage", ["obs"])["file"]
        data_file.write_bytes(os.urandom(data_file.stat().st_size))
        with pytest.raises(ValueError, match=rf"checksum mismatch in .*{data_file.name}"):
            LazyMemmapStorage(10).loads(dumped)

    def test_extra_bytes_are_refused(self, dumped):
        data_file = dumped / "storage" / _entry(dumped / "storage", ["act"])["file"]
        data_file.write_bytes(data_file.read_bytes() + b"\x00")
        with pytest.raises(ValueError, match=rf"{data_file.name} to hold 32 bytes"):
            LazyMemmapStorage(10).loads(dumped)

    def test_file_name_outside_the_directory_is_refused(self, dumped):
        manifest = dumped / "storage" / "manifest.json"
        content = json.loads(manifest.read_text())
        content["entries"][0]["file"] = "../../etc/passwd"
        rewrite_json(manifest, content)
        with pytest.raises(ValueError, match=r"data file names like '0\.bin'"):
            LazyMemmapStorage(10).loads(dumped)

    def test_bool_file_with_other_bytes_is_refused(self, tmp_path):
        storage = LazyTensorStorage(4)
        storage.set(torch.arange(4), TensorDict({"done": torch.zeros(4, dtype=torch.bool)}, [4]))
        storage.dumps(tmp_path)
        entry = _entry(tmp_path / "storage", ["done"])
        forged = b"\x00\x02\x00\x00"
        (tmp_path / "storage" / entry["file"]).write_bytes(forged)
        # a consistent forgery: fix the data checksum too
        crc = zlib.crc32(forged, _files._header_crc("bool", [4]))
        entry["checksum"] = f"crc32:{crc:08x}"
        manifest = tmp_path / "storage" / "manifest.json"
        content = json.loads(manifest.read_text())
        content["entries"] = [entry]
        rewrite_json(manifest, content)
        with pytest.raises(ValueError, match=rf"booleans .* in .*{entry['file']}"):
            LazyTensorStorage(4).loads(tmp_path)


class TestSamplerAndWriterFiles:
    def _prioritized(self):
        rb = _buffer(sampler=PrioritizedSampler(10, 0.7, 0.5))
        rb.extend(_td(6))
        rb.update_priority(torch.arange(6), torch.arange(1, 7).float())
        return rb

    def test_truncated_sampler_tensor_file_names_the_file(self, tmp_path):
        self._prioritized().sampler.dumps(tmp_path)
        manifest = json.loads((tmp_path / "tensors" / "manifest.json").read_text())
        data_file = tmp_path / "tensors" / manifest["entries"][0]["file"]
        data_file.write_bytes(data_file.read_bytes()[:3])
        with pytest.raises(ValueError, match=rf"{data_file.name} to hold .* found 3 bytes"):
            self._prioritized().sampler.loads(tmp_path)

    def test_truncated_writer_tensor_file_names_the_file(self, tmp_path):
        rb = _buffer(writer=TensorDictMaxValueWriter(rank_key="obs"))
        rb.extend(_td(4))
        rb.writer.dumps(tmp_path)
        manifest = json.loads((tmp_path / "tensors" / "manifest.json").read_text())
        data_file = tmp_path / "tensors" / manifest["entries"][0]["file"]
        data_file.write_bytes(b"")
        with pytest.raises(ValueError, match=rf"{data_file.name} to hold .* found 0 bytes"):
            rb.writer.loads(tmp_path)

    @pytest.mark.parametrize("cursor", [10, 11, -1, 1.5])
    def test_writer_cursor_out_of_range_is_refused(self, tmp_path, cursor):
        rb = _buffer()
        rb.extend(_td(4))
        rb.dumps(tmp_path / "ck")
        meta = _snapshot(tmp_path / "ck") / "writer" / "sampler_meta.json"
        content = json.loads(meta.read_text())
        content["state"]["_cursor"] = cursor
        rewrite_json(meta, content)
        with pytest.raises(ValueError, match=r"writer cursor .*\[0, 10\)"):
            _buffer().loads(tmp_path / "ck")


@pytest.mark.parametrize("cursor", [-1, 1.5, "3", None])
def test_standalone_writer_refuses_a_bad_cursor(tmp_path, cursor):
    writer = RoundRobinWriter()
    writer.dumps(tmp_path)
    meta = tmp_path / "sampler_meta.json"
    content = json.loads(meta.read_text())
    content["state"]["_cursor"] = cursor
    rewrite_json(meta, content)
    with pytest.raises(ValueError, match="'_cursor' to be an int >= 0"):
        writer.loads(tmp_path)


class TestAtomicLoads:
    def test_corrupt_sampler_leaves_the_buffer_unchanged(self, tmp_path):
        source = _buffer(sampler=PrioritizedSampler(10, 0.7, 0.5))
        source.extend(_td(6))
        source.dumps(tmp_path / "ck")
        target = _buffer(sampler=PrioritizedSampler(10, 0.7, 0.5))
        target.extend(_td(3, offset=100))
        target.update_priority(torch.arange(3), torch.tensor([5.0, 6.0, 7.0]))
        before = target[:].clone(), target.sampler.state_dict(), target.writer._cursor
        manifest = _snapshot(tmp_path / "ck") / "sampler" / "tensors" / "manifest.json"
        manifest.write_bytes(b"\x00" * 10)
        with pytest.raises(ValueError, match=r"manifest\.json"):
            target.loads(tmp_path / "ck")
        assert len(target) == 3 and (target[:] == before[0]).all()
        assert target.writer._cursor == before[2]
        after = target.sampler.state_dict()
        assert all(
            torch.equal(torch.as_tensor(after[k]), torch.as_tensor(v)) for k, v in before[1].items()
        )

    def test_component_refusing_its_state_rolls_back_the_others(self, tmp_path, monkeypatch):
        source = _buffer()
        source.extend(_td(6))
        source.dumps(tmp_path / "ck")
        target = _buffer()
        target.extend(_td(2, offset=50))

        def refuse(state):
            raise ValueError("storage refuses")

        monkeypatch.setattr(target.storage, "_stage_loads", lambda path: lambda: refuse(None))
        with pytest.raises(ValueError, match="storage refuses"):
            target.loads(tmp_path / "ck")
        assert target.writer._cursor == 2 and len(target) == 2
        assert target[:]["obs"].tolist() == [50.0, 51.0]

    def test_load_state_dict_refused_by_the_storage_changes_nothing(self):
        source = _buffer()
        source.extend(_td(6))
        state = source.state_dict()
        state["_storage"]["metadata"] = state["_storage"]["metadata"].replace(
            '"len": 6', '"len": 99'
        )
        target = _buffer()
        target.extend(_td(2, offset=50))
        with pytest.raises(ValueError, match="len"):
            target.load_state_dict(state)
        assert target.writer._cursor == 2 and len(target) == 2
        assert target[:]["obs"].tolist() == [50.0, 51.0]

    def test_list_storage_loads_more_items_than_capacity_is_refused(self, tmp_path):
        storage = ListStorage(8)
        storage.set(torch.arange(5), list(range(5)))
        storage.dumps(tmp_path)
        small = ListStorage(3)
        small.set(0, "kept")
        with pytest.raises(ValueError, match="more than the capacity 3"):
            small.loads(tmp_path)
        assert small.get(0) == "kept"


@needs_h5py
class TestH5Validation:
    @pytest.fixture
    def dumped(self, tmp_path):
        storage = LazyTensorStorage(8)
        storage.checkpointer = H5StorageCheckpointer()
        obs = torch.arange(6.0)
        done = torch.tensor([False, False, True, False, False, False]).unsqueeze(-1)
        storage.set(
            torch.arange(6), TensorDict({"obs": obs, "next": {"obs": obs + 1, "done": done}}, [6])
        )
        storage.dumps(tmp_path)
        return tmp_path

    def _load(self, path):
        storage = LazyTensorStorage(8)
        storage.checkpointer = H5StorageCheckpointer()
        storage.loads(path)
        return storage

    def test_round_trip(self, dumped):
        assert self._load(dumped).get(torch.arange(6))["next", "obs"].tolist() == [1, 2, 3, 4, 5, 6]

    def test_missing_column_names_file_and_dataset(self, dumped):
        import h5py

        with h5py.File(dumped / "checkpoint.h5", "a") as file:
            del file["storage/obs"]
        with pytest.raises(ValueError, match=r"dataset 'storage/obs' in .*checkpoint\.h5"):
            self._load(dumped)

    def test_changed_dtype_names_file_and_dataset(self, dumped):
        import h5py

        with h5py.File(dumped / "checkpoint.h5", "a") as file:
            values = file["storage/obs"][()]
            del file["storage/obs"]
            file.create_dataset("storage/obs", data=values.astype("int32"))
        with pytest.raises(ValueError, match=r"'storage/obs' of .*checkpoint\.h5 .*dtype"):
            self._load(dumped)

    def test_fewer_rows_names_file_and_dataset(self, dumped):
        import h5py

        with h5py.File(dumped / "checkpoint.h5", "a") as file:
            values = file["storage/obs"][()]
            del file["storage/obs"]
            file.create_dataset("storage/obs", data=values[:4])
        with pytest.raises(ValueError, match=r"'storage/obs' of .*checkpoint\.h5 .*shape"):
            self._load(dumped)

    def test_values_changed_in_place_fail_the_checksum(self, dumped):
        import h5py

        with h5py.File(dumped / "checkpoint.h5", "a") as file:
            file["storage/obs"][2] = 42.0
        with pytest.raises(ValueError, match=r"checksum mismatch in the dataset 'storage/obs'"):
            self._load(dumped)


class TestBufferMetadata:
    def test_bad_batch_size_is_refused(self, tmp_path):
        rb = ReplayBuffer(storage=LazyTensorStorage(4), batch_size=2)
        rb.extend(torch.arange(3))
        rb.dumps(tmp_path / "ck")
        _edit(_snapshot(tmp_path / "ck") / "buffer_metadata.json", batch_size=-3)
        with pytest.raises(ValueError, match=r"batch_size .*buffer_metadata\.json"):
            ReplayBuffer(storage=LazyTensorStorage(4)).loads(tmp_path / "ck")
