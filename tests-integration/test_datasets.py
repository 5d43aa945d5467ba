"""The seeds' dataset examples (data_14: D4RL, data_15: Roboset preprocess), verbatim but
for the imports, against miniature source files served from a local HTTP server."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

pytest.importorskip("h5py")

from rl_datasets.testing import LocalFileServer, write_d4rl_file
from rl_stack.data.datasets import D4RLExperienceReplay, RobosetExperienceReplay
from rl_stack.data.replay_buffers import SamplerWithoutReplacement
from rl_stack.envs.transforms import RenameTransform

KITCHEN = "kitchen/mini_kitchen_microwave_kettle_light_slider-v0.hdf5"
TIMEOUTS = [49, 99, 149, 199, 249]  # five episodes of 50 steps, ended by time limits


@pytest.fixture
def kitchen(tmp_path, monkeypatch):
    write_d4rl_file(tmp_path / "remote" / KITCHEN, 251, obs_dim=60, action_dim=9, timeouts=TIMEOUTS)
    monkeypatch.setenv("RL_DATASETS_ROOT", str(tmp_path / "root"))
    with LocalFileServer(tmp_path / "remote") as server:
        monkeypatch.setenv("RL_DATASETS_D4RL_URL", server.url)
        yield server


def test_d4rl_split_trajs_rename_and_iterate(kitchen):
    # 003, "Datasets" (data_14)
    dataset = D4RLExperienceReplay("kitchen-complete-v0", split_trajs=True, batch_size=10)
    sample = dataset.sample()  # will sample 10 trajectories since split_trajs is set to True
    assert sample.batch_size == torch.Size([10, 50])
    assert sample["observation"].shape == torch.Size([10, 50, 60])
    assert sample["action"].shape == torch.Size([10, 50, 9])
    assert sample["next", "done"][:, -1].all()
    dataset.append_transform(
        RenameTransform(["done", ("next", "done")], ["terminal", ("next", "terminal")])
    )
    renamed = dataset.sample()  # The "done" has been renamed to "terminal"
    assert "terminal" in renamed.keys() and "done" not in renamed.keys()
    assert ("next", "terminal") in renamed.keys(True)
    # we can also use a `SamplerWithoutReplacement` to iterate over the dataset with random samples:
    dataset = D4RLExperienceReplay(
        "kitchen-complete-v0",
        sampler=SamplerWithoutReplacement(drop_last=True),
        split_trajs=True,
        batch_size=3,
    )
    seen = []
    for data in dataset:
        assert data.batch_size == torch.Size([3, 50])
        seen.extend(data["traj_ids"][:, 0].tolist())
    assert len(seen) == 3 and len(set(seen)) == 3  # 5 trajectories, batches of 3, drop_last


def _write_roboset(folder, seed=0):
    import h5py

    rng = np.random.default_rng(seed)
    target = folder / "FK1-v4(expert)" / "FK1_MicroOpenRandom_v2d-v4"
    target.mkdir(parents=True)
    with h5py.File(target / "FK1_MicroOpenRandom_v2d-v4.h5", "w") as file:
        for n in range(8):
            steps = 40
            group = file.create_group(f"Trial{n}")
            group.create_dataset(
                "observations", data=rng.standard_normal((steps, 75)).astype(np.float32)
            )
            group.create_dataset("actions", data=rng.standard_normal((steps, 9)).astype(np.float32))
            group.create_dataset("rewards", data=rng.standard_normal(steps))
            group.create_dataset("done", data=np.eye(1, steps, steps - 1, dtype=bool)[0])
            group.create_dataset("env_infos/time", data=np.arange(steps, dtype=np.float64))


def test_roboset_preprocess_is_kept_on_recreation(tmp_path, monkeypatch):
    # 003, "Transforming datasets" (data_15)
    constants = pytest.importorskip("huggingface_hub.constants")
    repo = tmp_path / "hub" / "RoboSet_Sim"
    _write_roboset(repo)
    monkeypatch.setenv("RL_DATASETS_ROOT", str(tmp_path / "root"))
    with LocalFileServer(tmp_path, hub_repos={"datasets/jdvakil/RoboSet_Sim": repo}) as server:
        endpoint = server.url.rstrip("/")
        monkeypatch.setattr(constants, "ENDPOINT", endpoint)
        monkeypatch.setattr(
            constants,
            "HUGGINGFACE_CO_URL_TEMPLATE",
            endpoint + "/{repo_id}/resolve/{revision}/{filename}",
        )
        dataset = RobosetExperienceReplay(
            "FK1-v4(expert)/FK1_MicroOpenRandom_v2d-v4", batch_size=32, download="force"
        )

    def func(data):
        return data.set("obs_norm", data.get("observation").norm(dim=-1))

    dataset.preprocess(
        func,
        num_workers=max(1, os.cpu_count() - 2),
        num_chunks=1000,
        mp_start_method="fork",
    )
    sample = dataset.sample()
    assert "obs_norm" in sample.keys()
    # re-recreating the dataset gives us the transformed version back.
    dataset = RobosetExperienceReplay("FK1-v4(expert)/FK1_MicroOpenRandom_v2d-v4", batch_size=32)
    sample = dataset.sample()
    assert "obs_norm" in sample.keys()
    torch.testing.assert_close(sample["obs_norm"], sample["observation"].norm(dim=-1))


def test_cli_download_then_info(tmp_path, monkeypatch, capsys):
    # rl-stack datasets download / info, against the local server
    from rl_stack._cli import main

    remote = tmp_path / "remote"
    write_d4rl_file(remote / "gym_mujoco_v2" / "hopper_medium-v2.hdf5", 30, terminals=[9])
    with LocalFileServer(remote) as server:
        monkeypatch.setenv("RL_DATASETS_D4RL_URL", server.url)
        argv = ["datasets", "download", "d4rl:hopper-medium-v2", "--root", str(tmp_path / "r")]
        assert main(argv) == 0
    assert "29 transitions" in capsys.readouterr().out
    assert main(["datasets", "info", "d4rl:hopper-medium-v2", "--root", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "converted   yes" in out and "transitions 29" in out
