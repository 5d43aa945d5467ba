"""VD4RLExperienceReplay: V-D4RL .npz files served by a local stand-in of the hub."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("huggingface_hub")

from rl_datasets import VD4RLExperienceReplay

DATASET = "main/walker_walk/expert/64px"


def write_vd4rl(folder, steps=12, ends=(4, 11), seed=0):
    rng = np.random.default_rng(seed)
    target = folder / "vd4rl" / DATASET
    target.mkdir(parents=True)
    is_last = np.zeros(steps, bool)
    is_last[list(ends)] = True
    is_first = np.zeros(steps, bool)
    is_first[0] = True
    is_first[[e + 1 for e in ends if e + 1 < steps]] = True
    arrays = {
        "image": rng.integers(0, 255, (steps, 8, 8, 3), dtype=np.uint8),
        "action": rng.standard_normal((steps, 6)).astype(np.float32),
        "reward": rng.standard_normal(steps).astype(np.float32),
        "discount": np.ones(steps, np.float32),
        "is_first": is_first,
        "is_last": is_last,
        "is_terminal": np.eye(1, steps, ends[0], dtype=bool)[0],
        "qpos": rng.standard_normal((steps, 2)),
    }
    np.savez(target / "episodes_0.npz", **arrays)
    return arrays


class TestVD4RLExperienceReplay:
    def test_transitions_match_the_file(self, hub, root):
        arrays = write_vd4rl(hub.repo("conglu/vd4rl"))
        data = VD4RLExperienceReplay(DATASET, batch_size=4, root=root, totensor=False)
        td = data[:]
        np.testing.assert_array_equal(td["pixels"].numpy(), arrays["image"])
        expected = np.zeros_like(arrays["image"])
        expected[:-1] = arrays["image"][1:]
        expected[[4, 11]] = 0  # episode ends: the next frame is another episode's
        np.testing.assert_array_equal(td["next", "pixels"].numpy(), expected)
        assert td["next", "done"].squeeze(-1).nonzero().squeeze(-1).tolist() == [4, 11]
        assert td["next", "terminated"].squeeze(-1).nonzero().squeeze(-1).tolist() == [4]
        assert td["next", "truncated"].squeeze(-1).nonzero().squeeze(-1).tolist() == [11]
        np.testing.assert_array_equal(td["state", "qpos"].numpy(), arrays["qpos"])

    def test_samples_are_float_channel_first_images(self, hub, root):
        write_vd4rl(hub.repo("conglu/vd4rl"))
        sample = VD4RLExperienceReplay(DATASET, batch_size=4, root=root, image_size=16).sample()
        assert sample["pixels"].shape == torch.Size([4, 3, 16, 16])
        assert sample["pixels"].dtype == torch.float32 and sample["pixels"].max() <= 1

    def test_non_npz_file_is_an_error_naming_it(self, hub, root):
        target = hub.repo("conglu/vd4rl") / "vd4rl" / DATASET
        target.mkdir(parents=True)
        (target / "bad.npz").write_bytes(b"no zip here")
        with pytest.raises(ValueError, match=r"bad\.npz is not a V-D4RL"):
            VD4RLExperienceReplay(DATASET, batch_size=4, root=root)
