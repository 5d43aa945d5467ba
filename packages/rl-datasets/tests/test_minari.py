"""MinariExperienceReplay without the minari package: a Minari main_data.hdf5 served by a
local stand-in of the hub, fetched with huggingface_hub and read with h5py."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

pytest.importorskip("h5py")
pytest.importorskip("huggingface_hub")

from rl_datasets import MinariExperienceReplay

DATASET = "D4RL/door/human-v2"
LENGTHS = [5, 7, 4]


@pytest.fixture(autouse=True)
def without_minari(monkeypatch):
    """These tests read with h5py: the ``minari`` package is hidden where it is installed."""
    monkeypatch.setitem(sys.modules, "minari", None)


class TestMinariExperienceReplay:
    def test_transitions_match_the_episodes(self, hub, root, write_minari):
        episodes = write_minari(hub.repo("farama-minari/D4RL"))
        data = MinariExperienceReplay(DATASET, batch_size=4, root=root)
        td = data[:]
        assert len(data) == sum(LENGTHS)
        offset = 0
        for n, ep in enumerate(episodes):
            rows = slice(offset, offset + LENGTHS[n])
            np.testing.assert_array_equal(
                td["observation", "observation"][rows].numpy(), ep["obs"][:-1]
            )
            # Minari keeps the final observation: next is exact at the episode's end
            np.testing.assert_array_equal(
                td["next", "observation", "observation"][rows].numpy(), ep["obs"][1:]
            )
            np.testing.assert_array_equal(td["action"][rows].numpy(), ep["actions"])
            np.testing.assert_array_equal(
                td["next", "reward"][rows].squeeze(-1).numpy(), ep["rewards"]
            )
            np.testing.assert_array_equal(
                td["next", "terminated"][rows].squeeze(-1).numpy(), ep["terminations"]
            )
            np.testing.assert_array_equal(
                td["next", "truncated"][rows].squeeze(-1).numpy(), ep["truncations"]
            )
            assert td["next", "done"][rows].squeeze(-1).tolist() == [False] * (LENGTHS[n] - 1) + [
                True
            ]
            np.testing.assert_array_equal(td["info", "success"][rows].numpy(), ep["success"][:-1])
            np.testing.assert_array_equal(td["next", "info", "dist"][rows].numpy(), ep["dist"])
            assert (td["episode"][rows] == n).all()
            offset += LENGTHS[n]
        assert not td["done"].any()
        assert data.metadata["minari"]["total_steps"] == sum(LENGTHS)
        assert data.metadata["reader"] == "h5py"

    def test_split_trajs_and_slice_sampling(self, hub, root, write_minari):
        write_minari(hub.repo("farama-minari/D4RL"))
        data = MinariExperienceReplay(DATASET, batch_size=2, root=root, split_trajs=True)
        assert data[:]["mask"].sum(-1).tolist() == LENGTHS
        assert data.sample().batch_size == torch.Size([2, max(LENGTHS)])

    def test_missing_files_in_the_repo_is_an_error(self, hub, root):
        hub.repo("farama-minari/D4RL")
        with pytest.raises(ValueError, match=r"has no \.hdf5/\.json file under 'door/human-v2'"):
            MinariExperienceReplay(DATASET, batch_size=2, root=root)

    def test_unknown_id_suggests_close_ids(self, root):
        with pytest.raises(ValueError, match="Did you mean: 'D4RL/door/human-v2'"):
            MinariExperienceReplay("D4RL/door/humans-v2", batch_size=2, root=root)

    def test_local_minari_folder(self, tmp_path, monkeypatch, root, write_minari):
        local = tmp_path / "minari"
        episodes = write_minari(local / "D4RL")
        monkeypatch.setenv("MINARI_DATASETS_PATH", str(local))
        data = MinariExperienceReplay(DATASET, batch_size=2, root=root, load_from_local_minari=True)
        np.testing.assert_array_equal(data[:4]["action"].numpy(), episodes[0]["actions"][:4])
