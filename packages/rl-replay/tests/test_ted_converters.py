"""TED converters: each is the inverse of its pair (property tests), sizes, and errors."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensordict import NonTensorStack, TensorDict

from rl_replay import Flat2TED, H5Combine, H5Split, Nested2TED, TED2Flat, TED2Nested
from rl_replay._leaves import leaf_keys

try:
    import h5py
except ImportError:  # the h5 extra is not installed: TestH5 is skipped
    h5py = None


@st.composite
def teds(draw, non_tensor: bool = True):
    """A TED with time along dim 0, 0-1 extra batch dims, nested keys and several done entries."""
    T = draw(st.integers(1, 7))
    inner = draw(st.sampled_from([(), (2,), (3,)]))
    shape = (T, *inner)
    seed = draw(st.integers(0, 2**16))
    g = torch.Generator().manual_seed(seed)
    obs = torch.randn(T + 1, *inner, 3, generator=g)
    done = torch.rand(*shape, 1, generator=g) < draw(st.sampled_from([0.0, 0.3, 0.8]))
    truncated = done & (torch.rand(*shape, 1, generator=g) < 0.5)
    terminated = done & ~truncated
    nxt = obs[1:].clone()
    # after a done the next root observation comes from a reset, not from "next"
    reset = torch.randn(T, *inner, 3, generator=g)
    root = obs[:-1].clone()
    shifted_done = torch.cat([torch.zeros(1, *inner, 1, dtype=torch.bool), done[:-1]])
    root = torch.where(shifted_done, reset, root)
    pos = root[..., :2] * 10
    data = TensorDict(
        {
            "observation": root,
            ("agent", "pos"): pos,
            "action": torch.randint(0, 4, shape, generator=g),
            "done": torch.zeros(*shape, 1, dtype=torch.bool),
            "next": {
                "observation": torch.where(done, nxt, torch.roll(root, -1, 0)),
                ("agent", "pos"): torch.roll(pos, -1, 0),
                "done": done,
                "terminated": terminated,
                "truncated": truncated,
                "reward": torch.randn(*shape, 1, generator=g),
            },
        },
        batch_size=shape,
    )
    data["next", "agent", "pos"][-1] = 99.0  # the newest step's next is never recoverable
    if non_tensor and draw(st.booleans()):
        labels = [f"s{t}" for t in range(T)]
        if inner:
            labels = [[f"{label}-{j}" for j in range(inner[0])] for label in labels]
        data["info"] = NonTensorStack.from_list(labels)
    return data


def assert_same_ted(actual, expected):
    assert set(leaf_keys(actual)) == set(leaf_keys(expected))
    assert actual.batch_size == expected.batch_size
    for key in leaf_keys(expected):
        a, e = actual.get(key), expected.get(key)
        if isinstance(e, torch.Tensor):
            assert a.dtype == e.dtype and torch.equal(a, e), key
        else:
            assert _plain(a) == _plain(e), key


def _plain(value):
    value = value.tolist() if hasattr(value, "tolist") else value
    return [_plain(v) for v in value] if isinstance(value, list) else value


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class TestTED2Flat:
    @SETTINGS
    @given(teds())
    def test_flat2ted_inverts_ted2flat(self, data):
        assert_same_ted(Flat2TED()(TED2Flat()(data)), data)

    @SETTINGS
    @given(teds(), st.booleans())
    def test_round_trip_of_a_full_circular_storage(self, data, full):
        to_flat = TED2Flat()
        to_flat.is_full = full
        assert_same_ted(Flat2TED()(to_flat(data)), data)

    def test_flat_form_stores_each_observation_once(self):
        T = 100
        obs = torch.randn(T + 1, 64)
        done = torch.zeros(T, 1, dtype=torch.bool)
        done[49] = True
        data = TensorDict(
            {"observation": obs[:-1], "next": {"observation": obs[1:], "done": done}}, [T]
        )
        flat = TED2Flat()(data)
        assert "observation" not in flat["data", "next"].keys()
        assert flat["ends", "0_index"].tolist() == [49, 99]
        ted_bytes = data.bytes()
        assert flat.exclude("duplicated").bytes() < 0.55 * ted_bytes

    @pytest.mark.parametrize("offset", [0, 1, 3])
    def test_views_of_larger_tensors_round_trip(self, offset):
        # rows that start at odd offsets or have strides cannot be compared as int64 words
        base = torch.randn(40, 5)
        obs = base[offset : offset + 11, :3]
        done = torch.zeros(10, 1, dtype=torch.bool)
        done[4] = True
        ted = TensorDict(
            {"observation": obs[:-1], "next": {"observation": obs[1:], "done": done}}, [10]
        )
        assert_same_ted(Flat2TED()(TED2Flat()(ted)), ted)
        assert_same_ted(Flat2TED()(TED2Flat()(ted[1:])), ted[1:])

    def test_nan_and_signed_zero_round_trip_bitwise(self):
        obs = torch.tensor([[0.0], [float("nan")], [-0.0], [1.0], [float("nan")]])
        ted = TensorDict(
            {
                "observation": obs[:-1],
                "next": {
                    "observation": obs[1:].clone(),
                    "done": torch.zeros(4, 1, dtype=torch.bool),
                },
            },
            [4],
        )
        ted["next", "observation"][1] = 0.0  # +0.0 where the next root step holds -0.0
        out = Flat2TED()(TED2Flat()(ted))
        assert torch.equal(
            out["next", "observation"].view(torch.int32),
            ted["next", "observation"].view(torch.int32),
        )

    def test_shift_and_is_full_are_written_when_set(self):
        to_flat = TED2Flat()
        to_flat.shift, to_flat.is_full = 3, True
        flat = to_flat(_small_ted())
        assert flat.get_non_tensor("shift") == 3 and flat.get_non_tensor("is_full") is True

    def test_writes_into_out(self):
        data = _small_ted()
        out = data.clone().zero_()
        assert Flat2TED()(TED2Flat()(data), out=out) is out
        assert (out == data).all()

    def test_missing_done_entry_raises_key_error(self):
        data = _small_ted().exclude(("next", "done"))
        with pytest.raises(KeyError, match=r"TED2Flat expected a TED with a \('next', 'done'\)"):
            TED2Flat()(data)

    def test_data_without_next_raises_key_error(self):
        with pytest.raises(KeyError, match="'next'"):
            TED2Flat()(TensorDict({"observation": torch.zeros(3)}, [3]))

    def test_data_without_time_dim_raises(self):
        with pytest.raises(ValueError, match="time dim"):
            TED2Flat()(_small_ted()[0])

    def test_flat2ted_rejects_other_data(self):
        with pytest.raises(KeyError, match="Flat2TED expected the TED2Flat output with a 'data'"):
            Flat2TED()(_small_ted())


class TestTED2Nested:
    @SETTINGS
    @given(teds())
    def test_nested2ted_inverts_ted2nested(self, data):
        assert_same_ted(Nested2TED()(TED2Nested()(data)), data)

    def test_each_row_is_one_trajectory(self):
        data = _small_ted()
        nested = TED2Nested()(data)
        lengths = [len(t) for t in nested["data", "observation"].unbind(0)]
        assert lengths == [3, 2]

    def test_nested2ted_rejects_flat_data(self):
        with pytest.raises(KeyError, match="'lengths'"):
            Nested2TED()(TED2Flat()(_small_ted()))


@pytest.mark.skipif(h5py is None, reason="needs h5py, the rl-replay[h5] extra")
class TestH5:
    @SETTINGS
    @given(teds(), st.sampled_from([None, "gzip"]))
    def test_h5combine_inverts_h5split(self, data, compression):
        with tempfile.TemporaryDirectory() as tmp:
            path = H5Split(compression=compression)(data, Path(tmp) / "ted.h5")
            assert_same_ted(H5Combine()(path), data)

    def test_one_chunked_dataset_per_leaf(self, tmp_path):
        path = H5Split(compression="gzip")(_small_ted(), tmp_path / "t.h5")
        with h5py.File(path) as file:
            dataset = file["storage/observation"]
            assert dataset.chunks is not None and dataset.compression == "gzip"
            assert "next" not in file["storage"] or "observation" not in file["storage/next"]

    def test_file_of_another_layout_raises(self, tmp_path):
        path = tmp_path / "other.h5"
        with h5py.File(path, "w") as file:
            file.create_dataset("x", data=[1, 2])
        with pytest.raises(ValueError, match="expected an HDF5 file written by H5Split"):
            H5Combine()(path)

    def test_not_hdf5_raises(self, tmp_path):
        path = tmp_path / "text.h5"
        path.write_text("hello")
        with pytest.raises(ValueError, match="could not read"):
            H5Combine()(path)

    def test_missing_file_raises(self, tmp_path):
        with pytest.raises(FileNotFoundError, match="Write it with H5Split"):
            H5Combine()(tmp_path / "none.h5")

    def test_h5combine_writes_into_out(self, tmp_path):
        data = _small_ted()
        out = data.clone().zero_()
        assert H5Combine()(H5Split()(data, tmp_path / "t.h5"), out=out) is out
        assert (out == data).all()

    def test_non_json_non_tensor_leaf_raises(self, tmp_path):
        data = _small_ted()
        data["info"] = NonTensorStack.from_list([object()] * 5)
        with pytest.raises(TypeError, match="JSON"):
            H5Split()(data, tmp_path / "t.h5")


def _small_ted() -> TensorDict:
    obs = torch.arange(6.0).unsqueeze(-1)
    done = torch.tensor([False, False, True, False, False]).unsqueeze(-1)
    return TensorDict(
        {"observation": obs[:-1], "next": {"observation": obs[1:], "done": done}}, [5]
    )
