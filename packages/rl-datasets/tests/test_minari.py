"""MinariExperienceReplay: a Minari main_data.hdf5 served by a local stand-in of the hub."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

h5py = pytest.importorskip("h5py")
pytest.importorskip("huggingface_hub")

from rl_datasets import MinariExperienceReplay  # noqa: E402

DATASET = "D4RL/door/human-v2"
LENGTHS = [5, 7, 4]


def write_minari(folder, lengths=LENGTHS, seed=0):
    """Minari's layout: data/main_data.hdf5 with episode_<n> groups, data/metadata.json."""
    rng = np.random.default_rng(seed)
    data = folder / "door" / "human-v2" / "data"
    data.mkdir(parents=True)
    episodes = []
    with h5py.File(data / "main_data.hdf5", "w") as file:
        for n, steps in enumerate(lengths):
            group = file.create_group(f"episode_{n}")
            ep = {
                "obs": rng.standard_normal((steps + 1, 3)),
                "goal": rng.standard_normal((steps + 1, 2)),
                "actions": rng.standard_normal((steps, 2)).astype(np.float32),
                "rewards": rng.standard_normal(steps),
                "terminations": np.eye(1, steps, steps - 1, dtype=bool)[0]
                if n != 1
                else np.zeros(steps, bool),
                "truncations": np.zeros(steps, bool)
                if n != 1
                else np.eye(1, steps, steps - 1, dtype=bool)[0],
                "success": rng.integers(0, 2, steps + 1).astype(bool),
                "dist": rng.standard_normal(steps),
            }
            group.create_dataset("observations/observation", data=ep["obs"])
            group.create_dataset("observations/desired_goal", data=ep["goal"])
            for key in ("actions", "rewards", "terminations", "truncations"):
                group.create_dataset(key, data=ep[key])
            group.create_dataset("infos/success", data=ep["success"])
            group.create_dataset("infos/dist", data=ep["dist"])
            group.attrs["id"] = n
            episodes.append(ep)
    (data / "metadata.json").write_text(
        json.dumps({"dataset_id": DATASET, "total_steps": sum(lengths)})
    )
    return episodes


class TestMinariExperienceReplay:
    def test_transitions_match_the_episodes(self, hub, root):
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

    def test_split_trajs_and_slice_sampling(self, hub, root):
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

    def test_local_minari_folder(self, tmp_path, monkeypatch, root):
        local = tmp_path / "minari"
        episodes = write_minari(local / "D4RL")
        monkeypatch.setenv("MINARI_DATASETS_PATH", str(local))
        data = MinariExperienceReplay(DATASET, batch_size=2, root=root, load_from_local_minari=True)
        np.testing.assert_array_equal(data[:4]["action"].numpy(), episodes[0]["actions"][:4])
