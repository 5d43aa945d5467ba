"""RobosetExperienceReplay: RoboHive .h5 files served by a local stand-in of the hub."""

from __future__ import annotations

import numpy as np
import pytest

h5py = pytest.importorskip("h5py")
pytest.importorskip("huggingface_hub")

from rl_datasets import RobosetExperienceReplay  # noqa: E402

DATASET = "FK1-v4(expert)/FK1_MicroOpenRandom_v2d-v4"


def write_roboset(folder, trials=((0, 6), (1, 4)), files=2, seed=0):
    """Roboset's layout: <dataset_id>/*.h5, each with Trial<n> groups."""
    rng = np.random.default_rng(seed)
    out = []
    target = folder / DATASET
    target.mkdir(parents=True)
    for f in range(files):
        with h5py.File(target / f"FK1_MicroOpenRandom_v2d-v4_{f}.h5", "w") as file:
            for number, steps in trials:
                done = np.zeros(steps, bool)
                if number == 0:
                    done[-1] = True
                trial = {
                    "observations": rng.standard_normal((steps, 5)).astype(np.float32),
                    "actions": rng.standard_normal((steps, 3)).astype(np.float32),
                    "rewards": rng.standard_normal(steps),
                    "done": done,
                    "time": rng.standard_normal(steps),
                }
                group = file.create_group(f"Trial{number}")
                for key in ("observations", "actions", "rewards", "done"):
                    group.create_dataset(key, data=trial[key], compression="gzip")
                group.create_dataset("env_infos/time", data=trial["time"])
                out.append(trial)
    return out


class TestRobosetExperienceReplay:
    def test_transitions_match_the_trials(self, hub, root):
        trials = write_roboset(hub.repo("jdvakil/RoboSet_Sim"))
        data = RobosetExperienceReplay(DATASET, batch_size=4, root=root)
        td = data[:]
        assert len(data) == sum(t["actions"].shape[0] for t in trials)
        offset = 0
        for i, trial in enumerate(trials):
            steps = trial["actions"].shape[0]
            rows = slice(offset, offset + steps)
            np.testing.assert_array_equal(td["observation"][rows].numpy(), trial["observations"])
            expected = np.zeros_like(trial["observations"])
            expected[:-1] = trial["observations"][1:]
            np.testing.assert_array_equal(td["next", "observation"][rows].numpy(), expected)
            np.testing.assert_array_equal(
                td["next", "info", "time"][rows][:-1].numpy(), trial["time"][1:]
            )
            np.testing.assert_array_equal(
                td["next", "reward"][rows].squeeze(-1).numpy(), trial["rewards"]
            )
            done = td["next", "done"][rows].squeeze(-1)
            assert done.tolist() == [False] * (steps - 1) + [True]  # every trial ends
            assert bool(td["next", "terminated"][rows][-1]) == bool(trial["done"][-1])
            assert bool(td["next", "truncated"][rows][-1]) == (not trial["done"][-1])
            assert td["seed"][rows].unique().tolist() == [i // 2]
            offset += steps

    def test_corrupt_h5_is_an_error_naming_the_file(self, hub, root):
        target = hub.repo("jdvakil/RoboSet_Sim") / DATASET
        target.mkdir(parents=True)
        (target / "broken.h5").write_bytes(b"garbage" * 20)
        with pytest.raises(ValueError, match=r"broken\.h5 is not a readable HDF5"):
            RobosetExperienceReplay(DATASET, batch_size=4, root=root)
        assert not (root / DATASET).exists()

    def test_unknown_id_suggests_close_ids(self, root):
        with pytest.raises(ValueError, match="Did you mean"):
            RobosetExperienceReplay(
                "FK1-v4(expert)/FK1_MicroOpenRandom_v2d-v3", batch_size=4, root=root
            )
