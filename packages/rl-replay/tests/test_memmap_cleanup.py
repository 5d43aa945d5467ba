"""``LazyMemmapStorage(auto_cleanup=...)`` and ``cleanup()``: who removes the memmap files."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest
import torch

from rl_replay import LazyMemmapStorage, ReplayBuffer


def _filled(storage):
    ReplayBuffer(storage=storage).extend(torch.zeros(4, 2))
    return storage


def test_a_given_directory_is_kept_by_default(tmp_path):
    scratch = tmp_path / "mine"
    storage = _filled(LazyMemmapStorage(8, scratch_dir=scratch))
    assert storage.auto_cleanup is False
    del storage
    gc.collect()
    assert any(scratch.iterdir())


def test_the_temporary_directory_goes_with_the_storage():
    storage = _filled(LazyMemmapStorage(8))
    assert storage.auto_cleanup is True
    scratch = storage.scratch_dir
    del storage
    gc.collect()
    assert not scratch.exists()


def test_opting_in_removes_a_given_directory_on_collection(tmp_path):
    scratch = tmp_path / "mine"
    storage = _filled(LazyMemmapStorage(8, scratch_dir=scratch, auto_cleanup=True))
    del storage
    gc.collect()
    assert not scratch.exists()


def test_opting_out_keeps_the_temporary_directory():
    storage = _filled(LazyMemmapStorage(8, auto_cleanup=False))
    scratch = storage.scratch_dir
    del storage
    gc.collect()
    assert any(scratch.iterdir())
    assert LazyMemmapStorage(1, scratch_dir=scratch, auto_cleanup=True).cleanup() is True


def test_cleanup_reports_whether_files_were_removed(tmp_path):
    storage = _filled(LazyMemmapStorage(8, scratch_dir=tmp_path / "a"))
    assert storage.cleanup() is True
    assert not (tmp_path / "a").exists()
    assert storage.cleanup() is False  # idempotent
    assert LazyMemmapStorage(8).cleanup() is False  # never written


def test_cleanup_of_a_directory_removed_elsewhere(tmp_path):
    import shutil

    storage = _filled(LazyMemmapStorage(8, scratch_dir=tmp_path / "a", auto_cleanup=True))
    shutil.rmtree(tmp_path / "a")
    assert storage.cleanup() is False


def test_directory_removed_at_interpreter_exit(tmp_path):
    scratch = tmp_path / "exit"
    script = (
        "import torch\n"
        "from rl_replay import LazyMemmapStorage, ReplayBuffer\n"
        f"storage = LazyMemmapStorage(8, scratch_dir={str(scratch)!r}, auto_cleanup=True)\n"
        "ReplayBuffer(storage=storage).extend(torch.zeros(3))\n"
        "assert any(storage.scratch_dir.iterdir())\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert not scratch.exists()


def test_auto_cleanup_must_be_a_bool():
    with pytest.raises(TypeError, match="auto_cleanup"):
        LazyMemmapStorage(8, auto_cleanup="yes")
