"""Sharing a LazyMemmapStorage-backed buffer across processes (the seed's example), fork and spawn."""

from __future__ import annotations

import pickle
import tempfile

import pytest
import torch
from tensordict import TensorDict
from torch import multiprocessing as mp

from rl_replay import (
    LazyMemmapStorage,
    LazyTensorStorage,
    ListStorage,
    ReplayBuffer,
    TensorDictReplayBuffer,
)
from rl_replay.testing import extend_from_worker, extend_one_at_a_time


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_worker_extends_are_seen_by_the_parent(start_method):
    rb = TensorDictReplayBuffer(storage=LazyMemmapStorage(21))
    td = TensorDict({"a": torch.zeros(10)}, [10])
    rb.extend(td)

    proc = mp.get_context(start_method).Process(target=extend_from_worker, args=(rb,))
    proc.start()
    proc.join(timeout=120)
    assert proc.exitcode == 0
    # the replay buffer now has a length of 20, since the worker updated it
    assert len(rb) == 20
    assert (rb["a"][:10] == 0).all()  # data from main process
    assert (rb["a"][10:20] == 1).all()  # data from remote process
    # the writer cursor is shared too: the parent continues after the worker's data
    assert rb.extend(TensorDict({"a": torch.full((1,), 2.0)}, [1])).tolist() == [20]


def test_pickled_buffer_keeps_its_components():
    rb = ReplayBuffer(storage=LazyTensorStorage(8), batch_size=2)
    rb.extend(torch.arange(3))
    clone = pickle.loads(pickle.dumps(rb))
    assert len(clone) == 3 and clone.sample().shape == (2,)
    assert clone.writer in clone.storage._attached_entities


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_concurrent_writers_in_two_processes_lose_nothing(start_method):
    rb = TensorDictReplayBuffer(storage=LazyMemmapStorage(4000))
    rb.extend(TensorDict({"a": torch.full((1,), -1.0)}, [1]))  # the parent allocates the storage
    ctx = mp.get_context(start_method)
    procs = [ctx.Process(target=extend_one_at_a_time, args=(rb, 10000.0 * k, 1500)) for k in (1, 2)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
        assert proc.exitcode == 0
    assert len(rb) == 3001
    written = sorted(rb["a"][:3001].tolist())
    assert written == [-1.0] + [10000.0 + i for i in range(1500)] + [
        20000.0 + i for i in range(1500)
    ]


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_buffer_handed_over_before_its_first_write_loses_no_row(
    start_method, tmp_path, monkeypatch
):
    # temporary directories of this process and its children go to tmp_path only
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    rb = TensorDictReplayBuffer(storage=LazyMemmapStorage(400))  # nothing written yet
    ctx = mp.get_context(start_method)
    procs = [ctx.Process(target=extend_one_at_a_time, args=(rb, 1000.0 * k, 150)) for k in (1, 2)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
        assert proc.exitcode == 0
    assert len(rb) == 300 and rb.writer._cursor == 300
    written = sorted(rb["a"][:300].tolist())
    assert written == [1000.0 + i for i in range(150)] + [2000.0 + i for i in range(150)]
    assert list(tmp_path.glob("rl_replay_*")) == [rb.storage.scratch_dir]  # the parent's only
    rb.extend(TensorDict({"a": torch.full((1,), -5.0)}, [1]))  # the parent writes to the same files
    assert rb[300]["a"].item() == -5.0


def test_checkpoint_of_a_buffer_a_child_allocated(tmp_path):
    rb = TensorDictReplayBuffer(storage=LazyMemmapStorage(50))
    proc = mp.get_context("fork").Process(target=extend_from_worker, args=(rb,))
    proc.start()
    proc.join(timeout=120)
    assert proc.exitcode == 0
    rb.dumps(tmp_path / "ck")
    restored = TensorDictReplayBuffer(storage=LazyMemmapStorage(50))
    restored.loads(tmp_path / "ck")
    assert len(restored) == 10 and (restored["a"] == 1).all()


def test_list_storage_is_refused_when_handed_to_a_spawned_process():
    rb = TensorDictReplayBuffer(storage=ListStorage(21))
    rb.extend(TensorDict({"a": torch.zeros(10)}, [10]))
    proc = mp.get_context("spawn").Process(target=extend_from_worker, args=(rb,))
    with pytest.raises(RuntimeError, match="Cannot share a storage of type ListStorage"):
        proc.start()
    assert len(rb) == 10 and pickle.loads(pickle.dumps(rb.storage)).get(0) is not None


def test_prefetching_buffer_cannot_be_shared():
    with pytest.raises(ValueError, match=r"Cannot share prefetched replay buffers.*prefetch=0"):
        ReplayBuffer(storage=LazyTensorStorage(10), batch_size=2, prefetch=1, shared=True)
    rb = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=2, prefetch=0, shared=True)
    assert rb.batch_size == 2
