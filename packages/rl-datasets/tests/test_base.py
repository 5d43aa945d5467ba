"""BaseDatasetExperienceReplay: conversion life cycle and preprocess, on a toy source."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

from rl_datasets import BaseDatasetExperienceReplay
from rl_datasets._ted import allocate

ROWS = 64


class _Toy(BaseDatasetExperienceReplay):
    """A source converted from a formula: observation[t] = t, episodes of 16 steps."""

    _source = "toy"
    conversions = 0

    def __init__(self, dataset_id="toy-v0", batch_size=4, *, root=None, download=True, **kwargs):
        self._open(dataset_id, root=root, download=download, batch_size=batch_size, **kwargs)

    def _convert(self, downloads: Path, dest: Path):
        type(self).conversions += 1
        specs = {
            "observation": ((3,), torch.float32),
            ("next", "observation"): ((3,), torch.float32),
            ("next", "done"): ((1,), torch.bool),
        }
        out = allocate(dest, specs, ROWS)
        steps = torch.arange(ROWS, dtype=torch.float32).unsqueeze(-1).expand(ROWS, 3)
        out["observation"].copy_(steps)
        out["next", "observation"].copy_(steps + 1)
        out["next", "done"].copy_((torch.arange(ROWS) % 16 == 15).unsqueeze(-1))
        return out, {"source": ["formula"]}


def add_norm(data):
    return data.set("obs_norm", data.get("observation").norm(dim=-1))


def fail_late(data):
    if data.get("observation")[:, 0].max() >= ROWS - 8:
        raise ArithmeticError("boom")
    return add_norm(data)


class TestBaseDatasetExperienceReplay:
    def test_direct_construction_is_a_plain_buffer(self):
        from rl_replay import LazyTensorStorage

        rb = BaseDatasetExperienceReplay(storage=LazyTensorStorage(5), batch_size=2)
        rb.extend(TensorDict({"a": torch.arange(5)}, [5]))
        assert rb.sample()["a"].shape == (2,)

    def test_conversion_runs_once_and_is_loaded_after(self, root):
        _Toy.conversions = 0
        first = _Toy(root=root)
        second = _Toy(root=root, download=False)
        assert _Toy.conversions == 1
        assert len(first) == len(second) == ROWS
        assert (root / "toy-v0" / ".complete").is_file()

    def test_dataset_is_read_only(self, root):
        data = _Toy(root=root)
        with pytest.raises(RuntimeError, match="immutable"):
            data.extend(data[:2])

    @pytest.mark.parametrize("download", ["yes", None, 2])
    def test_bad_download_value(self, root, download):
        with pytest.raises(ValueError, match="download to be True, False or 'force'"):
            _Toy(root=root, download=download)

    @pytest.mark.parametrize("num_workers", [None, 2])
    def test_preprocess_replaces_the_stored_dataset(self, root, num_workers):
        data = _Toy(root=root)
        data.preprocess(add_norm, num_workers=num_workers, num_chunks=8, mp_start_method="fork")
        sample = data.sample()
        assert "obs_norm" in sample.keys()
        expected = data[:]["observation"].norm(dim=-1)
        torch.testing.assert_close(data[:]["obs_norm"], expected)
        recreated = _Toy(root=root, download=False)
        assert "obs_norm" in recreated.sample().keys()

    def test_preprocess_with_a_closure_in_workers(self, root):
        scale = 3.0

        def scaled(data):
            return data.set("scaled", data.get("observation") * scale)

        data = _Toy(root=root)
        data.preprocess(scaled, num_workers=2, num_chunks=4, mp_start_method="fork")
        torch.testing.assert_close(data[:]["scaled"], data[:]["observation"] * 3)

    @pytest.mark.parametrize("num_workers", [None, 2])
    def test_failing_preprocess_leaves_the_dataset_intact(self, root, num_workers):
        data = _Toy(root=root)
        with pytest.raises(ArithmeticError, match="boom") as info:
            data.preprocess(
                fail_late, num_workers=num_workers, num_chunks=8, mp_start_method="fork"
            )
        assert any("dataset is unchanged" in note for note in getattr(info.value, "__notes__", []))
        assert "obs_norm" not in data.sample().keys()
        reloaded = _Toy(root=root, download=False)
        assert len(reloaded) == ROWS and "obs_norm" not in reloaded[:].keys()
        assert not list(root.glob(".*partial"))

    def test_a_worker_failing_leaves_the_dataset_intact(self, root):
        parent = os.getpid()

        def fail_in_a_worker(data):
            if os.getpid() != parent:
                raise ArithmeticError("worker boom")
            return add_norm(data)

        data = _Toy(root=root)
        with pytest.raises(ArithmeticError, match="worker boom") as info:
            # with max_tasks_per_child, only started workers run fn
            data.preprocess(fail_in_a_worker, num_workers=2, num_chunks=8, max_tasks_per_child=8)
        assert any("worker process" in note for note in info.value.__notes__)
        reloaded = _Toy(root=root, download=False)
        assert len(reloaded) == ROWS and "obs_norm" not in reloaded[:].keys()
        assert not list(root.glob(".*partial"))

    @pytest.mark.parametrize("method", ["fork", "spawn"])
    def test_preprocess_in_started_workers_only(self, root, tmp_path, monkeypatch, method):
        # spawned workers unpickle fn by name: it must live in an importable module
        (tmp_path / "spawn_fns.py").write_text(
            "def add_norm(data):\n"
            "    return data.set('obs_norm', data.get('observation').norm(dim=-1))\n"
        )
        monkeypatch.syspath_prepend(str(tmp_path))
        import spawn_fns

        data = _Toy(root=root)
        try:
            data.preprocess(
                spawn_fns.add_norm,
                num_workers=2,
                num_chunks=1,  # one worker is started (no more than the chunks)
                max_tasks_per_child=1,  # and it runs every chunk
                mp_start_method=method,
            )
        finally:
            sys.modules.pop("spawn_fns", None)
        expected = data[:]["observation"].norm(dim=-1)
        torch.testing.assert_close(_Toy(root=root, download=False)[:]["obs_norm"], expected)

    def test_preprocess_default_start_method_takes_closures(self, root):
        offset = 5.0
        data = _Toy(root=root)
        data.preprocess(lambda td: td.set("shifted", td["observation"] + offset), num_workers=2)
        torch.testing.assert_close(data[:]["shifted"], data[:]["observation"] + 5)

    def test_preprocess_to_dest_leaves_the_dataset(self, root, tmp_path):
        data = _Toy(root=root)
        storage = data.preprocess(add_norm, dest=tmp_path / "out", num_frames=10)
        assert len(storage) == 10 and "obs_norm" in storage.get(torch.arange(3)).keys()
        assert "obs_norm" not in data.sample().keys()

    def test_preprocess_keeps_appended_transforms(self, root):
        data = _Toy(root=root)
        data.append_transform(lambda td: td.set("seen", torch.ones(td.shape)))
        data.preprocess(add_norm)
        assert {"seen", "obs_norm"} <= set(data.sample().keys())

    def test_preprocess_bad_arguments(self, root):
        data = _Toy(root=root)
        with pytest.raises(ValueError, match="dim 0 only"):
            data.preprocess(add_norm, dim=1)
        with pytest.raises(ValueError, match="num_frames"):
            data.preprocess(add_norm, num_frames=ROWS + 1)
        with pytest.raises(TypeError, match="return a tensordict"):
            data.preprocess(lambda td: td["observation"])

    def test_preprocess_output_keys_must_not_change(self, root):
        def unstable(data):
            if data.shape[0] > 1:
                return data.exclude("observation")
            return data

        data = _Toy(root=root)
        with pytest.raises(KeyError, match="same entries"):
            data.preprocess(unstable, num_chunks=2)

    def test_delete_removes_the_files(self, root):
        data = _Toy(root=root)
        data.delete()
        assert not data.data_path.exists()
        with pytest.raises(FileNotFoundError):
            _Toy(root=root, download=False)


def scale_in_place_late(data):
    """Doubles the observation in place on rows >= 32 only, and aliases it as "obs_alias"."""
    if data.get("observation")[0, 0] >= 32:
        data.get("observation").mul_(2)
    return data.set("obs_alias", data.get("observation"))


def _observation_file(data):
    return data.data_path / "data" / "observation.memmap"


#: preprocess keywords: this process only, this process and a worker, started workers only
WHO_RUNS_FN = [{}, {"num_workers": 2}, {"num_workers": 2, "max_tasks_per_child": 64}]


class TestPreprocessInPlace:
    """The engine maps the source copy-on-write and does not rewrite unmodified entries."""

    @pytest.mark.parametrize("workers", WHO_RUNS_FN)
    def test_in_place_changes_are_written_per_chunk(self, root, workers):
        data = _Toy(root=root)
        data.preprocess(scale_in_place_late, num_chunks=4, mp_start_method="fork", **workers)
        steps = torch.arange(ROWS, dtype=torch.float32)
        expected = torch.where(steps >= 32, steps * 2, steps).unsqueeze(-1).expand(ROWS, 3)
        stored = _Toy(root=root, download=False)[:]
        torch.testing.assert_close(stored["observation"], expected)
        torch.testing.assert_close(stored["obs_alias"], expected)
        torch.testing.assert_close(
            stored["next", "observation"], (steps + 1).unsqueeze(-1).expand(ROWS, 3)
        )

    @pytest.mark.parametrize("workers", WHO_RUNS_FN)
    def test_in_place_changes_never_reach_the_source_when_fn_fails(self, root, workers):
        def double_then_fail(data):
            data.get("observation").mul_(2)
            return fail_late(data)

        data = _Toy(root=root)
        with pytest.raises(ArithmeticError, match="boom"):
            data.preprocess(double_then_fail, num_chunks=8, mp_start_method="fork", **workers)
        steps = torch.arange(ROWS, dtype=torch.float32).unsqueeze(-1).expand(ROWS, 3)
        torch.testing.assert_close(_Toy(root=root, download=False)[:]["observation"], steps)

    def test_unmodified_entries_are_linked_not_rewritten(self, root):
        data = _Toy(root=root)
        before = _observation_file(data).stat().st_ino
        data.preprocess(add_norm, num_chunks=4)
        assert _observation_file(data).stat().st_ino == before
        torch.testing.assert_close(data[:]["obs_norm"], data[:]["observation"].norm(dim=-1))

    def test_dest_gets_its_own_copy_of_unmodified_entries(self, root, tmp_path):
        data = _Toy(root=root)
        storage = data.preprocess(add_norm, dest=tmp_path / "out", num_frames=40, num_chunks=3)
        out_file = tmp_path / "out" / "data" / "observation.memmap"
        assert out_file.stat().st_ino != _observation_file(data).stat().st_ino
        copied = storage.get(torch.arange(40))
        torch.testing.assert_close(copied["observation"], data[:40]["observation"])
        torch.testing.assert_close(copied["next", "done"], data[:40]["next", "done"])
