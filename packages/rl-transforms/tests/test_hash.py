"""Hash: hashes written from entries, the default SHA-256 hash, the inverse look-up."""

from __future__ import annotations

import hashlib

import pytest
import torch
from tensordict import NonTensorData, TensorDict

from rl_envs_core import check_env_specs
from rl_envs_core.testing import CountingEnv
from rl_transforms import Compose, Hash, TransformedEnv


class TestHash:
    def test_reproducible_hash_is_sha256_of_seed_and_string(self):
        expected = hashlib.sha256(b"seedtext").digest()
        assert Hash.reproducible_hash("text", "seed").tolist() == list(expected)
        assert torch.equal(Hash.reproducible_hash(None), Hash.reproducible_hash(""))

    def test_default_hash_of_a_string_entry(self):
        out = Hash(["s"], ["h"])(TensorDict({"s": "abc"}))
        assert out["h"].dtype == torch.uint8
        assert out["h"].tolist() == list(hashlib.sha256(b"abc").digest())
        assert out["s"] == "abc"

    def test_custom_hash_fn_and_seed(self):
        calls = []

        def fn(value, seed):
            calls.append(seed)
            return value.sum() + seed

        out = Hash(["x"], ["h"], hash_fn=fn, seed=10)(TensorDict({"x": torch.ones(3)}))
        assert out["h"].item() == 13.0 and calls == [10]

    def test_stack_of_strings_is_given_as_a_list(self):
        seen = []

        def fn(values):
            seen.append(values)
            return torch.stack([Hash.reproducible_hash(v) for v in values])

        data = TensorDict({"s": torch.stack([NonTensorData("a"), NonTensorData("b")])}, [2])
        out = Hash(["s"], ["h"], hash_fn=fn)(data)
        assert seen == [["a", "b"]] and out["h"].shape == (2, 32)

    def test_inverse_recovers_the_hashed_input(self):
        t = Hash(["s"], ["h"], in_keys_inv=["s"], out_keys_inv=["h"])
        hashes = {text: t(TensorDict({"s": text}))["h"] for text in ("one", "two")}
        for text, value in hashes.items():
            assert t.inv(TensorDict({"h": value}))["s"] == text

    def test_shared_repertoire_is_filled(self):
        repertoire = {}
        t = Hash(["x"], ["h"], hash_fn=lambda x: x * 2, repertoire=repertoire)
        t(TensorDict({"x": torch.tensor([1, 2])}))
        assert list(repertoire) == [(2, 4)]
        assert torch.equal(repertoire[(2, 4)], torch.tensor([1, 2]))

    def test_unknown_hash_is_a_key_error(self):
        t = Hash(["s"], ["h"], in_keys_inv=["s"], out_keys_inv=["h"])
        with pytest.raises(KeyError, match="never produced"):
            t.inv(TensorDict({"h": torch.zeros(32, dtype=torch.uint8)}))

    def test_inverse_without_repertoire_is_reported(self):
        with pytest.raises(RuntimeError, match="no repertoire"):
            Hash(["s"], ["h"]).get_input_from_hash(torch.zeros(2))

    def test_hash_fn_must_return_a_tensor(self):
        with pytest.raises(TypeError, match=r"torch\.Tensor"):
            Hash(["x"], ["h"], hash_fn=lambda x: 3)(TensorDict({"x": torch.ones(1)}))

    def test_in_an_env_the_spec_holds_the_hash(self):
        env = TransformedEnv(
            CountingEnv(max_steps=5),
            Compose(Hash(["observation"], ["h"], hash_fn=lambda x: (x * 7).to(torch.int64))),
        )
        assert env.observation_spec["h"].dtype == torch.int64
        check_env_specs(env)
        data = env.rollout(3)
        assert data["next", "h"].squeeze(-1).tolist() == [7, 14, 21]

    @pytest.mark.parametrize(
        "value",
        [
            torch.tensor([5.0]),
            torch.tensor(0.5),
            torch.randn(3, generator=torch.Generator().manual_seed(0)),
            torch.tensor([[1, 2], [3, 40]], dtype=torch.int32),
            torch.tensor([True, False]),
            torch.ones(2, requires_grad=True),  # the text of a tensor torch prints itself
        ],
    )
    def test_default_hash_of_a_tensor_is_sha256_of_its_text(self, value):
        out = Hash(["x"], ["h"])(TensorDict({"x": value}))
        assert out["h"].tolist() == list(hashlib.sha256(str(value).encode()).digest())

    def test_default_hash_in_a_rollout_hashes_each_observation_text(self):
        env = TransformedEnv(CountingEnv(max_steps=10), Hash(["observation"], ["h"]))
        data = env.rollout(4)
        for obs, digest in zip(data["next", "observation"], data["next", "h"]):
            assert digest.tolist() == list(hashlib.sha256(str(obs).encode()).digest())

    def test_without_inverse_keys_a_step_runs_no_inverse(self):
        assert not Hash(["x"], ["h"])._has_inverse()
        assert Hash(["x"], ["h"], in_keys_inv=["x"], out_keys_inv=["h"])._has_inverse()
