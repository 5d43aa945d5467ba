"""Shared fixtures: a local HTTP server and a dataset root, so that no test needs the network."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rl_datasets.testing import LocalFileServer


@pytest.fixture
def served(tmp_path):
    """A LocalFileServer over ``tmp_path / "remote"`` (files written there are served)."""
    remote = tmp_path / "remote"
    remote.mkdir()
    with LocalFileServer(remote) as server:
        yield server


@pytest.fixture
def root(tmp_path):
    return tmp_path / "root"


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """A local stand-in of the Hugging Face hub: ``hub.repo("owner/name")`` is a folder whose
    files the hub client downloads (``huggingface_hub`` pointed at it)."""
    constants = pytest.importorskip("huggingface_hub.constants")

    class Hub:
        def __init__(self):
            self.repos = {}
            self.server = None

        def repo(self, repo_id):
            folder = tmp_path / "hub" / repo_id
            folder.mkdir(parents=True, exist_ok=True)
            self.repos[f"datasets/{repo_id}"] = folder
            return folder

    hub = Hub()
    with LocalFileServer(tmp_path, hub_repos=hub.repos) as server:
        hub.server = server
        endpoint = server.url.rstrip("/")
        monkeypatch.setattr(constants, "ENDPOINT", endpoint)
        monkeypatch.setattr(
            constants,
            "HUGGINGFACE_CO_URL_TEMPLATE",
            endpoint + "/{repo_id}/resolve/{revision}/{filename}",
        )
        # files fetched without local_dir (minari's metadata reads) go to a cache of this test
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
        monkeypatch.setenv("HF_HUB_OFFLINE", "0")
        monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        yield hub


MINARI_ID = "D4RL/door/human-v2"
MINARI_LENGTHS = [5, 7, 4]


def _box(shape, dtype):
    size = int(np.prod(shape))
    return {
        "type": "Box",
        "dtype": dtype,
        "shape": list(shape),
        "low": [-10.0] * size,
        "high": [10.0] * size,
    }


def write_minari_namespace(repo, datasets=(MINARI_ID,)):
    """The namespace files of a Minari hub repo (``D4RL`` with the ``D4RL/door`` namespace)."""
    (repo / "namespace_metadata.json").write_text(
        json.dumps({"datasets": list(datasets), "namespaces": ["D4RL/door"]})
    )
    (repo / "door").mkdir(parents=True, exist_ok=True)
    (repo / "door" / "namespace_metadata.json").write_text("{}")


@pytest.fixture
def write_minari():
    """Write a Minari dataset (``D4RL/door/human-v2``) into a namespace folder (a hub repo or
    a local Minari folder's ``D4RL``) in Minari's layout; return the episodes' arrays."""
    h5py = pytest.importorskip("h5py")

    def write(folder, lengths=MINARI_LENGTHS, seed=0, minari_version="0.5.0"):
        rng = np.random.default_rng(seed)
        data = folder / "door" / "human-v2" / "data"
        data.mkdir(parents=True)
        episodes = []
        with h5py.File(data / "main_data.hdf5", "w") as file:
            for n, steps in enumerate(lengths):
                group = file.create_group(f"episode_{n}")
                last = np.eye(1, steps, steps - 1, dtype=bool)[0]
                ep = {
                    "obs": rng.standard_normal((steps + 1, 3)),
                    "goal": rng.standard_normal((steps + 1, 2)),
                    "actions": rng.standard_normal((steps, 2)).astype(np.float32),
                    "rewards": rng.standard_normal(steps),
                    "terminations": last if n != 1 else np.zeros(steps, bool),
                    "truncations": np.zeros(steps, bool) if n != 1 else last,
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
                group.attrs["total_steps"] = steps
                episodes.append(ep)
        observation_space = {
            "type": "Dict",
            "subspaces": {
                "desired_goal": _box([2], "float64"),
                "observation": _box([3], "float64"),
            },
        }
        metadata = {
            "dataset_id": MINARI_ID,
            "total_episodes": len(lengths),
            "total_steps": sum(lengths),
            "data_format": "hdf5",
            "observation_space": json.dumps(observation_space),
            "action_space": json.dumps(_box([2], "float32")),
            "minari_version": minari_version,
        }
        (data / "metadata.json").write_text(json.dumps(metadata))
        write_minari_namespace(folder)
        return episodes

    write.namespace = write_minari_namespace  # the namespace files alone
    return write
