"""AtariDQNExperienceReplay: gzipped .npy checkpoints served locally; next frames formed on read."""

from __future__ import annotations

import gzip
import io

import numpy as np
import pytest
import torch

from rl_datasets import AtariDQNExperienceReplay
from rl_datasets._atari_dqn import BASE_URL_ENV

DATASET = "Pong/5"
ROWS = [20, 12]  # two checkpoints
TERMINALS = {0: [6], 1: [3]}


def write_checkpoints(remote, seed=0):
    rng = np.random.default_rng(seed)
    folder = remote / "Pong" / "5" / "replay_logs"
    folder.mkdir(parents=True)
    out = []
    for n, rows in enumerate(ROWS):
        terminal = np.zeros(rows, np.uint8)
        terminal[TERMINALS[n]] = 1
        arrays = {
            "$store$_observation_ckpt": rng.integers(0, 255, (rows, 6, 6), dtype=np.uint8),
            "$store$_action_ckpt": rng.integers(0, 6, rows).astype(np.int32),
            "$store$_reward_ckpt": rng.standard_normal(rows).astype(np.float32),
            "$store$_terminal_ckpt": terminal,
            "add_count_ckpt": np.array(rows),
            "invalid_range_ckpt": np.array([rows - 2, rows - 1, 0, 1, 2]),
        }
        for name, value in arrays.items():
            buffer = io.BytesIO()
            np.save(buffer, value)
            (folder / f"{name}.{n}.gz").write_bytes(gzip.compress(buffer.getvalue()))
        out.append(arrays)
    return out


@pytest.fixture
def checkpoints(served, monkeypatch):
    monkeypatch.setenv(BASE_URL_ENV, served.url)
    return write_checkpoints(served.directory)


class TestAtariDQNExperienceReplay:
    def test_frames_are_stored_once_and_next_is_formed_on_read(self, checkpoints, root):
        data = AtariDQNExperienceReplay(DATASET, batch_size=8, root=root)
        assert len(data) == sum(ROWS)
        frames = np.concatenate([c["$store$_observation_ckpt"] for c in checkpoints])
        td = data[:]
        np.testing.assert_array_equal(td["observation"].numpy(), frames)
        ends = [6, ROWS[0] - 1, ROWS[0] + 3, sum(ROWS) - 1]  # terminals and checkpoint ends
        expected = np.zeros_like(frames)
        expected[:-1] = frames[1:]
        expected[ends] = 0
        np.testing.assert_array_equal(td["next", "observation"].numpy(), expected)
        assert td["next", "done"].squeeze(-1).nonzero().squeeze(-1).tolist() == ends
        assert td["next", "truncated"].squeeze(-1).nonzero().squeeze(-1).tolist() == [
            ROWS[0] - 1,
            sum(ROWS) - 1,
        ]
        actions = np.concatenate([c["$store$_action_ckpt"] for c in checkpoints])
        np.testing.assert_array_equal(td["action"].numpy(), actions)
        stored = sorted(p.name for p in data.data_path.rglob("*.memmap"))
        assert not any("next" in p and "observation" in p for p in stored)
        assert data.metadata["checkpoints"][1]["add_count"] == ROWS[1]

    def test_sample_and_slices_follow_episodes(self, checkpoints, root):
        data = AtariDQNExperienceReplay(DATASET, batch_size=8, root=root, slice_len=4)
        sample = data.sample()
        assert sample.batch_size == torch.Size([8])
        episodes = sample["episode"].reshape(2, 4)
        assert (episodes == episodes[:, :1]).all()

    def test_preprocess_materialises_next(self, checkpoints, root):
        data = AtariDQNExperienceReplay(DATASET, batch_size=8, root=root)
        expected = data[:]["next", "observation"].float().mean((-1, -2))
        data.preprocess(
            lambda td: td.set("brightness", td["next", "observation"].float().mean((-1, -2)))
        )
        torch.testing.assert_close(data[:]["brightness"], expected)

    def test_corrupt_checkpoint_is_an_error_naming_it(self, served, monkeypatch, root):
        monkeypatch.setenv(BASE_URL_ENV, served.url)
        write_checkpoints(served.directory)
        (served.directory / "Pong/5/replay_logs/$store$_action_ckpt.1.gz").write_bytes(b"xx")
        with pytest.raises(ValueError, match=r"\$store\$_action_ckpt\.1\.gz"):
            AtariDQNExperienceReplay(DATASET, batch_size=8, root=root)

    def test_unknown_game_suggests_close_ids(self, root):
        with pytest.raises(ValueError, match="Did you mean: 'Pong/5'"):
            AtariDQNExperienceReplay("Png/5", root=root)
