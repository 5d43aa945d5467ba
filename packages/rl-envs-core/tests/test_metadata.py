"""EnvMetaData: specs, zero data and flags of an env, expandable to a batch."""

from __future__ import annotations

import pickle

import pytest
import torch

from rl_envs_core import EnvMetaData
from rl_envs_core.testing import CountingEnv


@pytest.fixture
def meta():
    return EnvMetaData.metadata_from_env(CountingEnv(batch_size=[2]))


class TestEnvMetaData:
    def test_metadata_from_env(self, meta):
        env = CountingEnv(batch_size=[2])
        assert meta.batch_size == torch.Size([2])
        assert meta.batch_locked and meta.device is None
        assert set(meta.tensordict.keys(True, True)) == set(env.fake_tensordict().keys(True, True))
        assert not meta.tensordict["next", "reward"].any()
        assert meta.output_spec == env.output_spec and meta.input_spec == env.input_spec
        assert "CountingEnv" in meta.env_str
        assert meta.device_map["observation"] == torch.device("cpu")

    def test_expand_prepends_dims(self, meta):
        big = meta.expand(3, 2)
        assert big.batch_size == torch.Size([3, 2])
        assert big.tensordict["next", "observation"].shape == torch.Size([3, 2, 1])
        assert big.specs["output_spec"]["full_observation_spec"]["observation"].shape == (3, 2, 1)
        assert meta.expand(torch.Size([3, 2])).batch_size == big.batch_size

    def test_expand_with_wrong_tail_raises(self, meta):
        with pytest.raises(ValueError, match=r"ending with the batch size \(2,\), got \(3,\)"):
            meta.expand(3)

    def test_clone_is_independent(self, meta):
        copy = meta.clone()
        copy.tensordict["observation"] += 1
        assert not meta.tensordict["observation"].any()

    def test_to_device_and_pickle(self, meta):
        moved = pickle.loads(pickle.dumps(meta.to("cpu")))
        assert moved.device == torch.device("cpu")
        assert moved.batch_size == meta.batch_size
        assert "EnvMetaData(" in repr(moved)
