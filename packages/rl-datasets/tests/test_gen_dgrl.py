"""GenDGRLExperienceReplay: a .tar.xz of per-episode .npy files served locally."""

from __future__ import annotations

import io
import tarfile

import numpy as np
import pytest

from rl_datasets import GenDGRLExperienceReplay
from rl_datasets._gen_dgrl import BASE_URL_ENV

DATASET = "bigfish-1M_E"
LENGTHS = [5, 3]


def _npy(value):
    buffer = io.BytesIO()
    np.save(buffer, np.array(value, dtype=object), allow_pickle=True)
    return buffer.getvalue()


def write_archive(remote, members):
    target = remote / "1M" / "level_200" / "expert" / "bigfish.tar.xz"
    target.parent.mkdir(parents=True)
    with tarfile.open(target, "w:xz") as tar:
        for name, payload in members:
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))


def episodes(seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for steps in LENGTHS:
        dones = np.zeros(steps, bool)
        dones[-1] = True
        out.append(
            {
                "observations": rng.integers(0, 255, (steps + 1, 4, 4, 3)).astype(np.uint8),
                "actions": rng.integers(0, 15, steps),
                "rewards": rng.standard_normal(steps),
                "dones": dones,
            }
        )
    return out


class TestGenDGRLExperienceReplay:
    def test_transitions_match_the_episodes(self, served, monkeypatch, root):
        monkeypatch.setenv(BASE_URL_ENV, served.url)
        eps = episodes()
        write_archive(served.directory, [(f"ep_{i}.npy", _npy(e)) for i, e in enumerate(eps)])
        td = GenDGRLExperienceReplay(DATASET, batch_size=4, root=root)[:]
        np.testing.assert_array_equal(td["observation"][:5].numpy(), eps[0]["observations"][:-1])
        np.testing.assert_array_equal(
            td["next", "observation"][:5].numpy(), eps[0]["observations"][1:]
        )
        np.testing.assert_array_equal(td["action"][5:].numpy(), eps[1]["actions"])
        assert td["next", "done"].squeeze(-1).nonzero().squeeze(-1).tolist() == [4, 7]

    def test_member_that_asks_for_code_is_rejected(self, served, monkeypatch, root, tmp_path):
        class Evil:
            def __reduce__(self):
                return (open, (str(tmp_path / "pwned"), "w"))

        monkeypatch.setenv(BASE_URL_ENV, served.url)
        write_archive(served.directory, [("ep_0.npy", _npy({"actions": Evil()}))])
        with pytest.raises(ValueError, match="rejected, never executed"):
            GenDGRLExperienceReplay(DATASET, root=root)
        assert not (tmp_path / "pwned").exists()

    def test_broken_archive_is_an_error_naming_it(self, served, monkeypatch, root):
        monkeypatch.setenv(BASE_URL_ENV, served.url)
        target = served.directory / "1M" / "level_200" / "expert" / "bigfish.tar.xz"
        target.parent.mkdir(parents=True)
        target.write_bytes(b"not an archive")
        with pytest.raises(ValueError, match=r"bigfish\.tar\.xz .* not a readable archive"):
            GenDGRLExperienceReplay(DATASET, root=root)
