"""MinariExperienceReplay through the minari package: its download from a local stand-in of
the hub and its storage reader give the same data as the h5py reader."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
import torch

pytest.importorskip("minari")
pytest.importorskip("h5py")
pytest.importorskip("huggingface_hub")

from rl_datasets import MinariExperienceReplay

DATASET = "D4RL/door/human-v2"


def h5py_reader(monkeypatch, **kwargs):
    """The dataset read with h5py (minari hidden), in its own root."""
    with monkeypatch.context() as patch:
        patch.setitem(sys.modules, "minari", None)
        return MinariExperienceReplay(DATASET, **kwargs)


def assert_same(a, b):
    keys = sorted(a.keys(True, True), key=str)
    assert keys == sorted(b.keys(True, True), key=str)
    for key in keys:
        assert a[key].dtype == b[key].dtype, key
        assert torch.equal(a[key], b[key]), key


class TestMinariPackage:
    def test_minari_and_h5py_readers_give_the_same_data(
        self, hub, tmp_path, monkeypatch, write_minari
    ):
        episodes = write_minari(hub.repo("farama-minari/D4RL"))
        monkeypatch.delenv("MINARI_DATASETS_PATH", raising=False)
        data = MinariExperienceReplay(DATASET, batch_size=4, root=tmp_path / "a")
        assert data.metadata["reader"] == "minari"
        assert data.metadata["source"] == [f"hf://farama-minari/{DATASET}"]
        # minari's own route to the files: the dataset listing, then its metadata
        paths = [path for _, path, _ in hub.server.requests]
        assert "/api/datasets" in paths
        assert "MINARI_DATASETS_PATH" not in os.environ  # restored
        reference = h5py_reader(monkeypatch, batch_size=4, root=tmp_path / "b")
        assert reference.metadata["reader"] == "h5py"
        assert_same(data[:], reference[:])
        assert data.metadata["minari"] == reference.metadata["minari"]
        assert data.metadata["spec"] == reference.metadata["spec"]
        # the episode ends: next observation, flags and ids come from the episodes
        td = data[:]
        ends = np.cumsum([len(ep["rewards"]) for ep in episodes]) - 1
        for n, end in enumerate(ends):
            np.testing.assert_array_equal(
                td["next", "observation", "observation"][end].numpy(), episodes[n]["obs"][-1]
            )
            assert bool(td["next", "done"][end])
            assert int(td["episode"][end]) == n
        assert not (tmp_path / "a" / ".downloads" / DATASET).exists()  # cleaned up

    def test_a_dataset_written_by_minari(self, hub, tmp_path, monkeypatch, write_minari):
        """Tuple observations, a discrete action, text infos: minari writes, both readers read."""
        import gymnasium as gym
        import minari
        from minari.data_collector import EpisodeBuffer

        rng = np.random.default_rng(1)
        buffers = []
        for n, steps in enumerate([3, 6]):
            buffers.append(
                EpisodeBuffer(
                    id=n,
                    observations=(
                        rng.standard_normal((steps + 1, 2)).astype(np.float32),
                        rng.integers(0, 4, steps + 1),
                    ),
                    actions=rng.integers(0, 3, steps),
                    rewards=rng.standard_normal(steps),
                    terminations=np.arange(steps) == steps - 1,
                    truncations=np.zeros(steps, bool),
                    infos={"step": np.arange(steps + 1), "note": ["text"] * (steps + 1)},
                )
            )
        observation_space = gym.spaces.Tuple(
            (gym.spaces.Box(-5, 5, (2,), np.float32), gym.spaces.Discrete(4))
        )
        published = tmp_path / "published"
        monkeypatch.setenv("MINARI_DATASETS_PATH", str(published))
        with pytest.warns(UserWarning):  # minari asks for an author, a description, ...
            minari.create_dataset_from_buffers(
                DATASET,
                buffers,
                observation_space=observation_space,
                action_space=gym.spaces.Discrete(3),
                algorithm_name="random",
            )
        repo = hub.repo("farama-minari/D4RL")
        (published / "D4RL").rename(repo.parent / "D4RL-published")
        repo.rmdir()
        (repo.parent / "D4RL-published").rename(repo)
        write_minari.namespace(repo)
        monkeypatch.delenv("MINARI_DATASETS_PATH")

        data = MinariExperienceReplay(DATASET, batch_size=2, root=tmp_path / "a")
        reference = h5py_reader(monkeypatch, batch_size=2, root=tmp_path / "b")
        assert (data.metadata["reader"], reference.metadata["reader"]) == ("minari", "h5py")
        td = data[:]
        assert_same(td, reference[:])
        first = buffers[0]
        np.testing.assert_array_equal(
            td["observation", "_index_0"][:3].numpy(), first.observations[0][:-1]
        )
        np.testing.assert_array_equal(
            td["next", "observation", "_index_1"][:3].numpy(), first.observations[1][1:]
        )
        np.testing.assert_array_equal(td["action"][:3].numpy(), first.actions)
        np.testing.assert_array_equal(td["next", "info", "step"][3:].numpy(), np.arange(1, 7))
        assert td["next", "terminated"].squeeze(-1).tolist() == [0, 0, 1, 0, 0, 0, 0, 0, 1]
        assert ("info", "note") not in td.keys(True)  # text is left out by both readers

    def test_local_minari_folder_through_minari(self, tmp_path, monkeypatch, root, write_minari):
        local = tmp_path / "minari"
        write_minari(local / "D4RL")
        monkeypatch.setenv("MINARI_DATASETS_PATH", str(local))
        data = MinariExperienceReplay(DATASET, batch_size=2, root=root, load_from_local_minari=True)
        assert data.metadata["reader"] == "minari"
        reference = h5py_reader(
            monkeypatch, batch_size=2, root=tmp_path / "b", load_from_local_minari=True
        )
        assert_same(data[:], reference[:])
        assert os.environ["MINARI_DATASETS_PATH"] == str(local)

    def test_missing_local_dataset_names_the_folder(self, tmp_path, monkeypatch, root):
        monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "empty"))
        with pytest.raises(FileNotFoundError, match="local Minari folder"):
            MinariExperienceReplay(DATASET, batch_size=2, root=root, load_from_local_minari=True)

    def test_an_interrupted_download_is_fetched_again(self, hub, root, write_minari):
        write_minari(hub.repo("farama-minari/D4RL"))
        # what a killed minari download leaves: the dataset folder, a cut file, no marker
        leftover = root / ".downloads" / DATASET / DATASET / "data"
        leftover.mkdir(parents=True)
        (leftover / "main_data.hdf5").write_bytes(b"\x89HDF\r\n")
        (leftover / "metadata.json").write_text("{")
        data = MinariExperienceReplay(DATASET, batch_size=2, root=root)
        assert len(data) == 16 and data.metadata["reader"] == "minari"

    def test_a_corrupt_file_is_an_error_and_fetched_again(self, hub, root, write_minari):
        repo = hub.repo("farama-minari/D4RL")
        write_minari(repo)
        served = repo / "door" / "human-v2" / "data" / "main_data.hdf5"
        good = served.read_bytes()
        served.write_bytes(b"not an hdf5 file")
        with pytest.raises(ValueError, match=r"main_data\.hdf5 is not a readable HDF5 file"):
            MinariExperienceReplay(DATASET, batch_size=2, root=root)
        served.write_bytes(good)  # the remote is fixed: the next try downloads it again
        assert len(MinariExperienceReplay(DATASET, batch_size=2, root=root)) == 16

    @pytest.mark.filterwarnings("ignore:Skipping farama-minari/D4RL")
    def test_a_dataset_missing_from_the_remote_is_an_error(self, hub, root):
        hub.repo("farama-minari/D4RL")
        with pytest.raises(ValueError, match="minari could not download 'D4RL/door/human-v2'"):
            MinariExperienceReplay(DATASET, batch_size=2, root=root)

    def test_a_network_failure_is_a_connection_error(self, root, monkeypatch):
        import minari

        def unreachable(dataset_id, force_download=False):
            raise OSError("[Errno 101] Network is unreachable")

        # (a real unreachable endpoint costs the hub client's retries: ~25 s)
        monkeypatch.setattr(minari, "download_dataset", unreachable)
        with pytest.raises(ConnectionError, match="HF_ENDPOINT or MINARI_REMOTE") as info:
            MinariExperienceReplay(DATASET, batch_size=2, root=root)
        assert "Network is unreachable" in str(info.value)
        assert not (root / DATASET).exists()
