"""Buffer dumps commit atomically; ListStorage checkpoints round-trip exactly or refuse."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch
from tensordict import TensorDict

from rl_replay import LazyTensorStorage, ListStorage, ReplayBuffer


def _buffer():
    return ReplayBuffer(storage=LazyTensorStorage(16), batch_size=2)


def _dumped(tmp_path, values):
    rb = _buffer()
    rb.extend(torch.tensor(values))
    rb.dumps(tmp_path / "ck")
    return rb


def _loaded(tmp_path):
    rb = _buffer()
    rb.loads(tmp_path / "ck")
    return rb[:].tolist()


class TestCommitWindow:
    @pytest.mark.parametrize("step", ["replace", "rename", "writing"])
    def test_crash_at_a_step_keeps_the_previous_checkpoint(self, tmp_path, monkeypatch, step):
        rb = _dumped(tmp_path, [1, 2, 3])
        rb.extend(torch.tensor([4, 5]))
        real = {"replace": os.replace, "rename": os.rename}

        def crash(*args, **kwargs):
            raise OSError(f"killed at {step}")

        if step == "writing":  # a crash while the snapshot is being written
            monkeypatch.setattr(rb.writer, "dumps", crash)
        else:
            monkeypatch.setattr(os, step, crash)
        try:
            rb.dumps(tmp_path / "ck")
        except OSError:
            pass
        monkeypatch.setattr(os, "replace", real["replace"])
        monkeypatch.setattr(os, "rename", real["rename"])
        assert _loaded(tmp_path) in ([1, 2, 3], [1, 2, 3, 4, 5])
        if step != "rename":  # os.rename is not part of the commit: the dump went through
            assert _loaded(tmp_path) == [1, 2, 3]

    def test_killed_dump_leaves_a_loadable_checkpoint_and_is_cleaned(self, tmp_path):
        _dumped(tmp_path, [1, 2, 3])
        # a process killed in the middle of a dump: its snapshot and pointer temporary stay
        code = (
            "import os, sys, torch\n"
            "from rl_replay import LazyTensorStorage, ReplayBuffer\n"
            "rb = ReplayBuffer(storage=LazyTensorStorage(16))\n"
            "rb.extend(torch.arange(7))\n"
            "os.replace = lambda *a, **k: os._exit(9)\n"
            f"rb.dumps({str(tmp_path / 'ck')!r})\n"
        )
        result = subprocess.run([sys.executable, "-c", code], env=os.environ, check=False)
        assert result.returncode == 9
        names = sorted(p.name for p in (tmp_path / "ck").iterdir())
        assert len([n for n in names if n.startswith("snapshot-")]) == 2
        assert any(n.startswith("CURRENT.tmp-") for n in names)
        assert _loaded(tmp_path) == [1, 2, 3]
        _dumped(tmp_path, [9])  # the next dump removes what the killed one left
        names = sorted(p.name for p in (tmp_path / "ck").iterdir())
        assert len(names) == 2 and names[0] == "CURRENT" and names[1].startswith("snapshot-")
        assert _loaded(tmp_path) == [9]

    def test_stale_temporaries_of_the_old_layout_are_removed(self, tmp_path):
        for name in ("ck.tmp-abc", "ck.old-def"):
            (tmp_path / name / "storage").mkdir(parents=True)
        (tmp_path / "ck").mkdir()
        (tmp_path / "ck" / ".complete").write_text("{}")
        (tmp_path / "ck" / "storage").mkdir()
        _dumped(tmp_path, [1])
        assert [p.name for p in tmp_path.iterdir()] == ["ck"]
        assert not (tmp_path / "ck" / "storage").exists()
        assert _loaded(tmp_path) == [1]

    def test_snapshot_of_a_live_process_is_kept(self, tmp_path):
        _dumped(tmp_path, [1])
        live = tmp_path / "ck" / f"snapshot-{os.getppid()}-abcdef"
        live.mkdir()
        _dumped(tmp_path, [2])
        assert live.is_dir()
        assert _loaded(tmp_path) == [2]

    def test_pointer_to_a_missing_snapshot_names_it(self, tmp_path):
        _dumped(tmp_path, [1])
        pointer = json.loads((tmp_path / "ck" / "CURRENT").read_text())
        shutil.rmtree(tmp_path / "ck" / pointer["snapshot"])
        with pytest.raises(FileNotFoundError, match=pointer["snapshot"]):
            _loaded(tmp_path)

    def test_pointer_outside_the_checkpoint_is_refused(self, tmp_path):
        from rl_replay.checkpointers._files import rewrite_json

        _dumped(tmp_path, [1])
        rewrite_json(tmp_path / "ck" / "CURRENT", {"snapshot": "../elsewhere"})
        with pytest.raises(ValueError, match="to name a snapshot directory"):
            _loaded(tmp_path)

    def test_old_layout_is_refused_with_advice(self, tmp_path):
        (tmp_path / "ck").mkdir()
        (tmp_path / "ck" / ".complete").write_text("{}")
        with pytest.raises(FileNotFoundError, match="older rl-replay version"):
            _loaded(tmp_path)


def _round_trip(tmp_path, items):
    storage = ListStorage(len(items) + 1)
    storage.set(torch.arange(len(items)), items)
    storage.dumps(tmp_path / "list")
    restored = ListStorage(len(items) + 1)
    restored.loads(tmp_path / "list")
    return restored.get(slice(0, len(items)))


class TestListStorageRoundTrip:
    def test_tuples_int_keys_and_nesting_come_back_exactly(self, tmp_path):
        items = [
            (1, 2),
            {1: "a", 2.5: None, (3, "x"): [True, False], "k": {"n": (4,)}},
            [(), [], {}],
            "text",
            -7,
            float("inf"),
            None,
        ]
        restored = _round_trip(tmp_path, items)
        assert restored == items
        assert [type(x) for x in restored] == [type(x) for x in items]
        assert type(restored[1][(3, "x")]) is list and type(restored[1]["k"]["n"]) is tuple
        assert list(restored[1]) == list(items[1])

    def test_item_that_looks_like_a_reference_is_kept(self, tmp_path):
        items = [torch.ones(2), {"__tensor__": "item_0"}, {"tensor": {"name": "t0"}}]
        restored = _round_trip(tmp_path, items)
        assert torch.equal(restored[0], items[0])
        assert restored[1:] == items[1:]

    def test_tensors_and_tensordicts_keep_dtype_shape_and_batch_size(self, tmp_path):
        td = TensorDict(
            {"a": torch.arange(6).view(2, 3), "sub": TensorDict({"b": torch.ones(2, 4)}, [2, 4])},
            [2],
        )
        items = [torch.arange(4, dtype=torch.int16), td, (torch.zeros(1, dtype=torch.bool),)]
        restored = _round_trip(tmp_path, items)
        assert restored[0].dtype == torch.int16 and torch.equal(restored[0], items[0])
        assert restored[1].batch_size == (2,) and restored[1]["sub"].batch_size == (2, 4)
        assert (restored[1] == td).all()
        assert type(restored[2]) is tuple and restored[2][0].dtype == torch.bool

    @pytest.mark.parametrize(
        "item, kind",
        [
            ({1, 2}, "set"),
            (b"bytes", "bytes"),
            (object(), "object"),
            ([1, {"a": range(3)}], "range"),
            (torch.nn.Parameter(torch.ones(1)), "Parameter"),
        ],
    )
    def test_what_cannot_round_trip_is_refused_at_dump(self, tmp_path, item, kind):
        storage = ListStorage(4)
        storage.set(0, item)
        with pytest.raises(TypeError, match=rf"item 0.* is a {kind}"):
            storage.dumps(tmp_path / "list")
        assert not (tmp_path / "list").exists()

    def test_load_state_dict_copies_tensors(self):
        source = ListStorage(4)
        source.set(torch.arange(2), [torch.ones(3), (TensorDict({"a": torch.ones(2)}, [2]), 5)])
        state = source.state_dict()
        target = ListStorage(4)
        target.load_state_dict(state)
        state["_storage"][0].zero_()
        state["_storage"][1][0]["a"].zero_()
        assert target.get(0).tolist() == [1.0, 1.0, 1.0]
        assert target.get(1)[0]["a"].tolist() == [1.0, 1.0] and target.get(1)[1] == 5

    def test_malformed_items_are_refused(self, tmp_path):
        from rl_replay.checkpointers._files import rewrite_json

        _round_trip(tmp_path, [1])
        meta = tmp_path / "list" / "storage_metadata.json"
        content = json.loads(meta.read_text())
        content["items"] = [{"list": [1], "extra": 2}]
        rewrite_json(meta, content)
        with pytest.raises(
            ValueError, match=r"one-entry tagged object in .*storage_metadata\.json"
        ):
            ListStorage(4).loads(tmp_path / "list")
