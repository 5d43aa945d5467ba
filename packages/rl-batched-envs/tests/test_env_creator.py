"""EnvCreator: metadata, picklability and state shared across workers."""

from __future__ import annotations

import pickle

import pytest
import torch

from rl_batched_envs import EnvCreator, ParallelEnv, SerialEnv
from rl_envs_core.testing import CountingEnv


class StatsEnv(CountingEnv):
    """Counts its steps in a buffer, like the running statistics of a VecNorm."""

    def __init__(self, width: int = 1, **kwargs):
        super().__init__(**kwargs)
        self.register_buffer("stats", torch.zeros(width))

    def _step(self, tensordict):
        self.stats.add_(1)
        return super()._step(tensordict)


class TestEnvCreator:
    def test_meta_data_describes_the_env(self):
        creator = EnvCreator(CountingEnv, {"batch_size": [3]})
        assert creator.meta_data.batch_size == torch.Size([3])
        assert creator.meta_data.specs["input_spec", "full_action_spec", "action"].shape == (3, 1)

    @pytest.mark.parametrize("cls", [SerialEnv, ParallelEnv])
    def test_buffers_are_shared_across_workers(self, cls):
        creator = EnvCreator(StatsEnv)
        with cls(2, creator) as env:
            env.rollout(3, break_when_any_done=False)
        assert creator.state_dict()["stats"].item() == 6.0

    def test_share_memory_false_keeps_envs_independent(self):
        creator = EnvCreator(StatsEnv, share_memory=False)
        env = creator()
        env.rollout(2, break_when_any_done=False)
        assert creator.state_dict() == {}
        assert creator().stats.item() == 0.0

    def test_load_state_dict_reaches_created_envs(self):
        creator = EnvCreator(StatsEnv)
        env = creator()
        creator.load_state_dict({"stats": torch.tensor([5.0])})
        assert env.stats.item() == 5.0
        with pytest.raises(KeyError, match="Available: \\['stats'\\]"):
            creator.load_state_dict({"nope": torch.zeros(1)})

    def test_pickles_with_its_kwargs(self):
        creator = EnvCreator(CountingEnv, {"max_steps": 9})
        clone = pickle.loads(pickle.dumps(creator))
        assert clone().max_steps == 9
        assert "max_steps" in repr(clone)

    def test_call_kwargs_and_make_variant(self):
        creator = EnvCreator(CountingEnv, {"max_steps": 2})
        assert creator(max_steps=4).max_steps == 4
        assert creator.make_variant(max_steps=6)().max_steps == 6
        assert creator().max_steps == 2

    def test_env_kwargs_as_keywords(self):
        creator = EnvCreator(CountingEnv, max_steps=5)
        assert creator().max_steps == 5 and creator.create_env_kwargs == {"max_steps": 5}
        both = EnvCreator(CountingEnv, {"max_steps": 3}, max_steps=5, batch_size=[2])
        assert both().max_steps == 3 and both().batch_size == (2,)  # the dict wins

    def test_mismatched_shared_shape_raises(self):
        creator = EnvCreator(StatsEnv)
        with pytest.raises(ValueError, match=r"shape \(1,\).*shape \(2,\)"):
            creator(width=2)

    @pytest.mark.parametrize(
        ("fn", "error", "match"),
        [("CountingEnv", TypeError, "callable"), (lambda: 1, TypeError, "expected an EnvBase")],
    )
    def test_bad_factories_raise(self, fn, error, match):
        with pytest.raises(error, match=match):
            EnvCreator(fn)
