"""OpenMLExperienceReplay: OpenML tables (scikit-learn's fetch_openml stood in by a local table)."""

from __future__ import annotations

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
sk_datasets = pytest.importorskip("sklearn.datasets")

from rl_datasets import OpenMLExperienceReplay  # noqa: E402


@pytest.fixture
def tables(monkeypatch):
    """fetch_openml answers from small frames shaped like the OpenML tables (no network)."""
    calls = []
    rng = np.random.default_rng(0)
    frames = {
        "shuttle": (
            pd.DataFrame(rng.standard_normal((30, 9)), columns=[f"A{i}" for i in range(9)]),
            pd.Series(rng.choice(["1", "4", "5"], 30), dtype="category"),
        ),
        "mushroom": (
            pd.DataFrame(
                {
                    "cap-shape": pd.Categorical(rng.choice(["x", "b", "f"], 20)),
                    "odor": pd.Categorical(rng.choice(["a", "n"], 20)),
                }
            ),
            pd.Series(rng.choice(["e", "p"], 20), dtype="category"),
        ),
    }

    def fetch_openml(name, *, version, return_X_y, as_frame, data_home):
        calls.append((name, version, data_home))
        return frames[name]

    monkeypatch.setattr(sk_datasets, "fetch_openml", fetch_openml)
    return frames, calls


class TestOpenMLExperienceReplay:
    def test_numeric_table_is_standardised_with_encoded_labels(self, tables, root):
        frames, calls = tables
        data = OpenMLExperienceReplay("shuttle", batch_size=8, root=root)
        td = data[:]
        x = frames["shuttle"][0].to_numpy()
        expected = (x - x.mean(0)) / x.std(0)
        np.testing.assert_allclose(td["X"].numpy(), expected, rtol=1e-5, atol=1e-5)
        labels = sorted(set(frames["shuttle"][1]))
        assert td["y"].tolist() == [labels.index(v) for v in frames["shuttle"][1]]
        assert data.max_outcome_val == len(labels) - 1
        assert calls[0][:2] == ("shuttle", 1)
        sample = data.sample()
        assert sample["X"].shape == (8, 9) and sample["y"].shape == (8,)

    def test_onehot_variant_encodes_categories(self, tables, root):
        td = OpenMLExperienceReplay("mushroom_onehot", batch_size=4, root=root)[:]
        assert td["X"].shape == (20, 5)  # 3 cap shapes + 2 odors
        assert (td["X"].sum(-1) == 2).all()

    def test_second_construction_does_not_fetch(self, tables, root):
        _, calls = tables
        OpenMLExperienceReplay("shuttle", batch_size=4, root=root)
        OpenMLExperienceReplay("shuttle", batch_size=4, root=root)
        assert len(calls) == 1

    def test_unknown_name_suggests_close_names(self, root):
        with pytest.raises(ValueError, match="Did you mean: 'shuttle'"):
            OpenMLExperienceReplay("shutle", batch_size=4, root=root)
