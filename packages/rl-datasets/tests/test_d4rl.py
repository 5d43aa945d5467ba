"""D4RLExperienceReplay: a D4RL-layout HDF5 file served locally, downloaded and converted."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

pytest.importorskip("h5py")

from rl_datasets import D4RLExperienceReplay
from rl_datasets._d4rl_files import BASE_URL_ENV, D4RL_FILES
from rl_datasets.testing import LocalFileServer, write_d4rl_file

DATASET = "maze2d-umaze-v1"
STEPS = 40
TERMINALS = [9]
TIMEOUTS = [24]


@pytest.fixture
def source(served, monkeypatch):
    monkeypatch.setenv(BASE_URL_ENV, served.url)
    arrays = write_d4rl_file(
        served.directory / D4RL_FILES[DATASET], STEPS, terminals=TERMINALS, timeouts=TIMEOUTS
    )
    return served, arrays


def _downloads(server):
    return [r for r in server.requests if r[1].endswith(".hdf5")]


class TestD4RLExperienceReplay:
    def test_transitions_match_the_source_arrays(self, source, root):
        _, arrays = source
        data = D4RLExperienceReplay(DATASET, 8, root=root)
        td = data[:]
        rows = STEPS - 1
        assert len(data) == rows
        done = np.zeros(rows, bool)
        done[TERMINALS + TIMEOUTS] = True
        np.testing.assert_array_equal(td["observation"].numpy(), arrays["observations"][:rows])
        np.testing.assert_array_equal(td["action"].numpy(), arrays["actions"][:rows])
        np.testing.assert_array_equal(
            td["next", "reward"].squeeze(-1).numpy(), arrays["rewards"][:rows]
        )
        expected_next = arrays["observations"][1:].copy()
        expected_next[done] = 0  # the successor of a done step is unknown
        np.testing.assert_array_equal(td["next", "observation"].numpy(), expected_next)
        assert td["next", "done"].squeeze(-1).nonzero().squeeze(-1).tolist() == TERMINALS + TIMEOUTS
        assert td["next", "terminated"].squeeze(-1).nonzero().squeeze(-1).tolist() == TERMINALS
        assert td["next", "truncated"].squeeze(-1).nonzero().squeeze(-1).tolist() == TIMEOUTS
        # the root flags are those of the previous step
        assert td["done"].squeeze(-1).nonzero().squeeze(-1).tolist() == [
            t + 1 for t in TERMINALS + TIMEOUTS
        ]
        np.testing.assert_array_equal(td["info", "qpos"].numpy(), arrays["infos/qpos"][:rows])
        np.testing.assert_array_equal(td["next", "info", "qpos"].numpy(), arrays["infos/qpos"][1:])
        assert td["episode"].unique_consecutive().tolist() == [0, 1, 2]
        assert td["episode"][TERMINALS[0] + 1].item() == 1

    def test_sample_has_the_batch_size_and_ted_keys(self, source, root):
        sample = D4RLExperienceReplay(DATASET, 8, root=root).sample()
        assert sample.batch_size == torch.Size([8])
        assert {
            "observation",
            "action",
            "index",
            ("next", "observation"),
            ("next", "reward"),
        } <= set(sample.keys(True))

    def test_metadata_is_stored_beside_the_data(self, source, root):
        server, _ = source
        data = D4RLExperienceReplay(DATASET, 8, root=root)
        meta = data.metadata
        assert meta["dataset_id"] == DATASET and meta["num_transitions"] == STEPS - 1
        assert meta["source"] == [server.url + D4RL_FILES[DATASET]]
        assert meta["metadata"]["algorithm"] == "SAC"
        assert meta["spec"]["observation"] == {"shape": [4], "dtype": "torch.float32"}
        assert (data.data_path / "metadata.json").is_file()

    def test_truncated_as_done_false_keeps_timeouts_out_of_done(self, source, root):
        td = D4RLExperienceReplay(DATASET, 8, root=root, use_truncated_as_done=False)[:]
        assert td["next", "done"].squeeze(-1).nonzero().squeeze(-1).tolist() == TERMINALS
        assert td["next", "truncated"].squeeze(-1).nonzero().squeeze(-1).tolist() == TIMEOUTS

    def test_second_construction_reads_the_converted_files(self, source, root):
        server, _ = source
        D4RLExperienceReplay(DATASET, 8, root=root)
        again = D4RLExperienceReplay(DATASET, 8, root=root, download=False)
        assert len(_downloads(server)) == 1 and len(again) == STEPS - 1

    def test_force_downloads_and_converts_again(self, source, root):
        server, _ = source
        D4RLExperienceReplay(DATASET, 8, root=root)
        D4RLExperienceReplay(DATASET, 8, root=root, download="force")
        assert len(_downloads(server)) == 2

    def test_split_trajs_pads_each_episode(self, source, root):
        data = D4RLExperienceReplay(DATASET, 2, root=root, split_trajs=True)
        td = data[:]
        lengths = [10, 15, STEPS - 1 - 25]
        assert td["mask"].sum(-1).tolist() == lengths
        assert td["traj_ids"][:, 0].tolist() == [0, 1, 2]
        for i, length in enumerate(lengths):
            assert td["next", "done"][i, length - 1].item()
        assert not td["observation"][0, lengths[0] :].any()
        sample = data.sample()
        assert sample.batch_size == torch.Size([2, max(lengths)])
        assert sample["index"].shape == sample["mask"].shape

    def test_unknown_id_suggests_close_ids(self, root):
        with pytest.raises(ValueError, match="Did you mean: 'maze2d-umaze-v1'"):
            D4RLExperienceReplay("maze2d-umaz-v1", 8, root=root)

    def test_truncated_download_resumes_with_a_range_request(self, source, root):
        server, arrays = source
        path = "/" + D4RL_FILES[DATASET]
        size = (server.directory / D4RL_FILES[DATASET]).stat().st_size
        server.truncate[path] = size // 2
        with pytest.raises(ValueError, match=r"maze2d-umaze-sparse-v1\.hdf5"):
            D4RLExperienceReplay(DATASET, 8, root=root)
        assert not (root / DATASET).exists()  # nothing half-converted under the final name
        server.truncate.clear()
        data = D4RLExperienceReplay(DATASET, 8, root=root)
        assert _downloads(server)[-1][2] == f"bytes={size // 2}-"
        np.testing.assert_array_equal(data[:]["observation"].numpy(), arrays["observations"][:-1])

    def test_corrupt_file_is_an_error_naming_it(self, served, monkeypatch, root):
        monkeypatch.setenv(BASE_URL_ENV, served.url)
        target = served.directory / D4RL_FILES[DATASET]
        target.parent.mkdir(parents=True)
        target.write_bytes(b"not an hdf5 file" * 10)
        with pytest.raises(
            ValueError, match=r"maze2d-umaze-sparse-v1\.hdf5 .* not a readable HDF5"
        ):
            D4RLExperienceReplay(DATASET, 8, root=root)

    def test_file_without_d4rl_entries_is_an_error(self, served, monkeypatch, root):
        import h5py

        monkeypatch.setenv(BASE_URL_ENV, served.url)
        target = served.directory / D4RL_FILES[DATASET]
        target.parent.mkdir(parents=True)
        with h5py.File(target, "w") as file:
            file.create_dataset("observations", data=np.zeros((4, 2)))
        with pytest.raises(KeyError, match="no 'actions' entry"):
            D4RLExperienceReplay(DATASET, 8, root=root)

    def test_missing_marker_is_refused_without_download_and_redone_with_it(self, source, root):
        server, _ = source
        data = D4RLExperienceReplay(DATASET, 8, root=root)
        (data.data_path / ".complete").unlink()
        with pytest.raises(RuntimeError, match="without its completion marker"):
            D4RLExperienceReplay(DATASET, 8, root=root, download=False)
        with pytest.warns(UserWarning, match="no completion marker"):
            D4RLExperienceReplay(DATASET, 8, root=root)
        assert len(_downloads(server)) == 2

    def test_download_false_without_data_is_an_error(self, root):
        with pytest.raises(FileNotFoundError, match="download=False"):
            D4RLExperienceReplay(DATASET, 8, root=root, download=False)

    def test_unreachable_server_is_a_connection_error(self, tmp_path, monkeypatch, root):
        with LocalFileServer(tmp_path) as server:
            url = server.url
        monkeypatch.setenv(BASE_URL_ENV, url)  # the server is stopped: nothing listens
        with pytest.raises(ConnectionError, match="could not reach"):
            D4RLExperienceReplay(DATASET, 8, root=root)

    def test_too_small_disk_is_refused_before_writing(self, source, root, monkeypatch):
        import shutil
        from collections import namedtuple

        usage = namedtuple("usage", "total used free")
        monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10, 10, 0))
        with pytest.raises(OSError, match="found 0 free"):
            D4RLExperienceReplay(DATASET, 8, root=root)

    def test_direct_download_refuses_env_kwargs(self, root):
        with pytest.raises(ValueError, match="env_kwargs"):
            D4RLExperienceReplay(DATASET, 8, root=root, direct_download=True, foo=1)

    def test_missing_h5py_names_the_extra(self, source, root, monkeypatch):
        monkeypatch.setitem(sys.modules, "h5py", None)
        with pytest.raises(ImportError, match=r"pip install 'rl-datasets\[h5\]'"):
            D4RLExperienceReplay(DATASET, 8, root=root)

    def test_root_env_variable_moves_the_default_root(self, source, tmp_path, monkeypatch):
        monkeypatch.setenv("RL_DATASETS_ROOT", str(tmp_path / "elsewhere"))
        data = D4RLExperienceReplay(DATASET, 8)
        assert data.data_path == tmp_path / "elsewhere" / "d4rl" / DATASET
