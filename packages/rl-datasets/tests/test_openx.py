"""OpenXExperienceReplay: tar shards of pickled episodes served by a local stand-in of the hub."""

from __future__ import annotations

import io
import pickle
import tarfile

import numpy as np
import pytest

pytest.importorskip("huggingface_hub")

from rl_datasets import OpenXExperienceReplay

DATASET = "cmu_stretch"
LENGTHS = [4, 6]


def write_shard(folder, records):
    target = folder / DATASET
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(target / "train-00000-of-00001.tar", "w") as tar:
        for i, record in enumerate(records):
            payload = record if isinstance(record, bytes) else pickle.dumps(record, protocol=5)
            info = tarfile.TarInfo(f"{i:05d}.data.pickle")
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))


def episodes(seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for length in LENGTHS:
        steps = []
        for t in range(length):
            steps.append(
                {
                    "observation": {
                        "state": rng.standard_normal(3).astype(np.float32),
                        "image": b"\x89PNG",
                    },
                    "action": rng.standard_normal(2).astype(np.float32),
                    "reward": float(t),
                    "is_first": t == 0,
                    "is_last": t == length - 1,
                    "is_terminal": t == length - 1 and length == 4,
                    "language_instruction": "pick",
                }
            )
        out.append({"steps": steps})
    return out


class TestOpenXExperienceReplay:
    def test_transitions_match_the_episodes(self, hub, root):
        eps = episodes()
        write_shard(hub.repo("jxu124/OpenX-Embodiment"), eps)
        data = OpenXExperienceReplay(DATASET, batch_size=4, root=root, slice_len=2)
        td = data[:]
        states = np.stack([s["observation"]["state"] for e in eps for s in e["steps"]])
        np.testing.assert_array_equal(td["observation", "state"].numpy(), states)
        expected = np.zeros_like(states)
        expected[:-1] = states[1:]
        expected[[3, 9]] = 0
        np.testing.assert_array_equal(td["next", "observation", "state"].numpy(), expected)
        assert td["next", "terminated"].squeeze(-1).nonzero().squeeze(-1).tolist() == [3]
        assert td["next", "truncated"].squeeze(-1).nonzero().squeeze(-1).tolist() == [9]
        assert "image" not in td["observation"].keys()  # encoded bytes are left out
        sample = data.sample()
        assert (sample["episode"].reshape(2, 2) == sample["episode"].reshape(2, 2)[:, :1]).all()

    def test_record_that_asks_for_code_is_rejected(self, hub, root):
        evil = b"cos\nsystem\n(S'echo pwned'\ntR."
        write_shard(hub.repo("jxu124/OpenX-Embodiment"), [evil])
        with pytest.raises(ValueError, match="rejected, never executed"):
            OpenXExperienceReplay(DATASET, root=root)

    def test_streaming_is_refused(self, root):
        with pytest.raises(NotImplementedError, match="streaming"):
            OpenXExperienceReplay(DATASET, streaming=True, root=root)
