"""The arrays-only .npy reader: exact arrays back, code never run."""

from __future__ import annotations

import io
import pickle

import numpy as np
import pytest

from rl_datasets._safe_npy import load_npy, load_pickle


@pytest.mark.parametrize("order", ["C", "F"])
def test_load_npy_returns_the_saved_array_in_either_memory_order(order):
    array = np.asarray(np.arange(12, dtype=np.float32).reshape(3, 4), order=order)
    buffer = io.BytesIO()
    np.save(buffer, array)
    buffer.seek(0)
    np.testing.assert_array_equal(load_npy(buffer, "a.npy"), array)


def test_load_pickle_refuses_a_global_that_would_run_code(tmp_path):
    marker = tmp_path / "ran"

    class Hostile:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    with pytest.raises(ValueError, match=r"hostile\.pkl"):
        load_pickle(pickle.dumps({"obs": Hostile()}), "hostile.pkl")
    assert not marker.exists()
