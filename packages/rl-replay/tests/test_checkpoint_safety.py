"""Hostile checkpoints: loading never unpickles, for every component that stores files.

Each checkpoint is dumped, then a payload whose unpickling would create a
marker file is planted where a loader that unpickles would read it (tensordict's
``other.pickle`` next to the tensor files, a pickle in place of a metadata
file, a manifest entry naming a pickle).  Loading must refuse with an error
naming the file, and the marker must never appear.
"""

from __future__ import annotations

import importlib.util
import json
import pickle
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

from rl_replay import (
    FlatStorageCheckpointer,
    H5StorageCheckpointer,
    LazyMemmapStorage,
    LazyTensorStorage,
    ListStorage,
    NestedStorageCheckpointer,
    PrioritizedSampler,
    ReplayBuffer,
    StorageEnsemble,
    TensorDictMaxValueWriter,
    TensorDictReplayBuffer,
    TensorStorage,
)
from rl_replay.checkpointers._files import rewrite_json

needs_h5py = pytest.mark.skipif(
    importlib.util.find_spec("h5py") is None, reason="needs h5py: pip install 'rl-replay[h5]'"
)


class _Payload:
    """Unpickling this creates ``marker``: the proof that a loader ran code from a file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def _rollout(steps: int = 8) -> TensorDict:
    obs = torch.arange(steps, dtype=torch.float32).unsqueeze(-1)
    done = (torch.arange(steps) % 4 == 3).unsqueeze(-1)
    return TensorDict(
        {
            "obs": obs,
            "next": {"obs": obs + 1, "done": done, "reward": torch.ones(steps, 1)},
        },
        [steps],
    )


def _storage(cls, checkpointer=None):
    storage = cls(8) if cls is not TensorStorage else TensorStorage(_rollout().clone())
    if checkpointer is not None:
        storage.checkpointer = checkpointer
    storage.set(torch.arange(8), _rollout())
    return storage


STORAGES = [
    pytest.param(lambda: _storage(LazyTensorStorage), id="lazy-tensor"),
    pytest.param(lambda: _storage(LazyMemmapStorage), id="lazy-memmap"),
    pytest.param(lambda: _storage(TensorStorage), id="tensor"),
    pytest.param(lambda: _storage(LazyTensorStorage, FlatStorageCheckpointer()), id="flat"),
    pytest.param(lambda: _storage(LazyMemmapStorage, NestedStorageCheckpointer()), id="nested"),
]


def _list_storage():
    storage = ListStorage(4)
    storage.set(torch.arange(3), ["a", torch.ones(2), _rollout(2)])
    return storage


def _prioritized_buffer():
    rb = ReplayBuffer(storage=LazyTensorStorage(8), sampler=PrioritizedSampler(8, 0.7, 0.5))
    rb.extend(torch.arange(6))
    rb.update_priority(torch.arange(6), torch.rand(6) + 0.1)
    return rb


def _max_value_buffer():
    rb = TensorDictReplayBuffer(
        storage=LazyTensorStorage(8), writer=TensorDictMaxValueWriter(rank_key="r")
    )
    rb.extend(TensorDict({"r": torch.rand(5), "x": torch.ones(5)}, [5]))
    return rb


def _plant(path: Path, marker: Path) -> list[Path]:
    """Put a tensordict-style ``other.pickle`` in every tensor directory under ``path``."""
    planted = []
    for manifest in path.rglob("manifest.json"):
        lure = manifest.parent / "other.pickle"
        lure.write_bytes(pickle.dumps({"x": _Payload(marker)}))
        planted.append(lure)
    return planted


def _assert_refused(load, path: Path, marker: Path, name: str, error=ValueError) -> None:
    with pytest.raises(error, match=name.replace(".", r"\.")):
        load(path)
    assert not marker.exists(), "loading ran code from the checkpoint"


class TestNoUnpickling:
    @pytest.mark.parametrize("make", STORAGES)
    def test_storage_checkpoint_with_pickle_lure_is_refused(self, tmp_path, make):
        storage = make()
        storage.dumps(tmp_path / "ck")
        marker = tmp_path / "marker"
        assert _plant(tmp_path / "ck", marker)
        target = make()
        _assert_refused(target.loads, tmp_path / "ck", marker, "other.pickle")

    @pytest.mark.parametrize("make", STORAGES)
    def test_manifest_naming_a_pickle_is_refused(self, tmp_path, make):
        storage = make()
        storage.dumps(tmp_path / "ck")
        manifest_path = tmp_path / "ck" / "storage" / "manifest.json"
        manifest = json.loads(manifest_path.read_text())
        entry = manifest["entries"][0]
        (manifest_path.parent / entry["file"]).unlink()
        (manifest_path.parent / "0.pickle").write_bytes(pickle.dumps(_Payload(tmp_path / "m")))
        entry["file"], entry["dtype"] = "0.pickle", "object"
        rewrite_json(manifest_path, manifest)
        _assert_refused(make().loads, tmp_path / "ck", tmp_path / "m", "0.pickle")

    def test_list_storage_with_pickle_lure_is_refused(self, tmp_path):
        _list_storage().dumps(tmp_path / "ck")
        marker = tmp_path / "marker"
        assert _plant(tmp_path / "ck", marker)
        _assert_refused(ListStorage(4).loads, tmp_path / "ck", marker, "other.pickle")

    def test_list_storage_metadata_replaced_by_a_pickle_is_refused(self, tmp_path):
        _list_storage().dumps(tmp_path / "ck")
        marker = tmp_path / "marker"
        meta = tmp_path / "ck" / "storage_metadata.json"
        meta.write_bytes(pickle.dumps(_Payload(marker)))
        _assert_refused(ListStorage(4).loads, tmp_path / "ck", marker, "storage_metadata.json")

    @pytest.mark.parametrize("part", ["sampler", "writer"])
    @pytest.mark.parametrize("make", [_prioritized_buffer, _max_value_buffer])
    def test_sampler_and_writer_state_with_pickle_lure_is_refused(self, tmp_path, make, part):
        component = getattr(make(), part)
        component.dumps(tmp_path / "ck")
        marker = tmp_path / "marker"
        lure = tmp_path / "ck" / "state.pkl"
        lure.write_bytes(pickle.dumps(_Payload(marker)))
        _assert_refused(getattr(make(), part).loads, tmp_path / "ck", marker, "state.pkl")

    @pytest.mark.parametrize("make", [_prioritized_buffer, _max_value_buffer])
    def test_state_metadata_replaced_by_a_pickle_is_refused(self, tmp_path, make):
        make().sampler.dumps(tmp_path / "ck")
        marker = tmp_path / "marker"
        (tmp_path / "ck" / "sampler_meta.json").write_bytes(pickle.dumps(_Payload(marker)))
        _assert_refused(make().sampler.loads, tmp_path / "ck", marker, "sampler_meta.json")

    def test_tensor_state_with_pickle_lure_is_refused(self, tmp_path):
        make = _prioritized_buffer
        make().sampler.dumps(tmp_path / "ck")
        marker = tmp_path / "marker"
        assert _plant(tmp_path / "ck", marker)
        _assert_refused(make().sampler.loads, tmp_path / "ck", marker, "other.pickle")

    @pytest.mark.parametrize("make", [_prioritized_buffer, _max_value_buffer])
    def test_buffer_with_pickle_lures_is_refused(self, tmp_path, make):
        make().dumps(tmp_path / "ck")
        marker = tmp_path / "marker"
        assert _plant(tmp_path / "ck", marker)
        _assert_refused(make().loads, tmp_path / "ck", marker, "other.pickle")

    def test_ensemble_with_pickle_lure_is_refused(self, tmp_path):
        def make():
            ensemble = StorageEnsemble(LazyTensorStorage(4), ListStorage(4))
            ensemble[0].set(torch.arange(2), torch.ones(2))
            ensemble[1].set(0, torch.zeros(3))
            return ensemble

        make().dumps(tmp_path / "ck")
        marker = tmp_path / "marker"
        assert len(_plant(tmp_path / "ck", marker)) == 2
        _assert_refused(make().loads, tmp_path / "ck", marker, "other.pickle")

    @needs_h5py
    def test_h5_checkpoint_with_pickle_lure_is_refused(self, tmp_path):
        make = lambda: _storage(LazyTensorStorage, H5StorageCheckpointer())  # noqa: E731
        make().dumps(tmp_path / "ck")
        marker = tmp_path / "marker"
        (tmp_path / "ck" / "other.pickle").write_bytes(pickle.dumps(_Payload(marker)))
        _assert_refused(make().loads, tmp_path / "ck", marker, "other.pickle")

    @needs_h5py
    def test_h5_object_dataset_is_refused(self, tmp_path):
        import h5py

        make = lambda: _storage(LazyTensorStorage, H5StorageCheckpointer())  # noqa: E731
        make().dumps(tmp_path / "ck")
        with h5py.File(tmp_path / "ck" / "checkpoint.h5", "a") as file:
            del file["storage/obs"]
            file.create_dataset("storage/obs", data=["a", "b"], dtype=h5py.string_dtype())
        with pytest.raises(ValueError, match=r"checkpoint\.h5"):
            make().loads(tmp_path / "ck")

    def test_old_memmap_layout_is_refused(self, tmp_path):
        # what rl-replay 0.1 wrote: tensordict memmaps, whose loader may unpickle
        storage = _storage(LazyTensorStorage)
        storage.dumps(tmp_path / "ck")
        marker = tmp_path / "marker"
        data = tmp_path / "ck" / "storage"
        for child in data.iterdir():
            child.unlink()
        data.rmdir()
        TensorDict({"obs": torch.ones(8)}, [8]).memmap(data)
        (data / "other.pickle").write_bytes(pickle.dumps({"x": _Payload(marker)}))
        _assert_refused(_storage(LazyTensorStorage).loads, tmp_path / "ck", marker, "other.pickle")
