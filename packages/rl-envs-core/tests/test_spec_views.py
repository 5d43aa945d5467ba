"""Spec accessors of EnvBase: views, leaf shortcuts, unbatched views, locking, caches."""

from __future__ import annotations

import pytest
import torch

from rl_envs_core import EnvBase, check_env_specs
from rl_envs_core.testing import CountingEnv
from rl_specs import Bounded, Categorical, Composite, Unbounded


@pytest.fixture
def env():
    return CountingEnv(batch_size=[4])


class TestSpecViews:
    def test_output_spec_holds_observation_reward_done(self, env):
        assert set(env.output_spec.keys()) == {
            "full_observation_spec", "full_reward_spec", "full_done_spec"
        }
        assert set(env.input_spec.keys()) == {"full_action_spec", "full_state_spec"}
        assert env.output_spec["full_reward_spec"] == env.full_reward_spec

    @pytest.mark.parametrize("role", ["action", "reward"])
    def test_leaf_accessor_returns_the_single_leaf(self, env, role):
        leaf = getattr(env, f"{role}_spec")
        assert not isinstance(leaf, Composite)
        assert leaf == getattr(env, f"full_{role}_spec")[role]
        assert leaf.shape == torch.Size([4, 1])

    def test_done_spec_is_composite_with_several_done_keys(self, env):
        assert isinstance(env.done_spec, Composite)
        assert set(env.done_keys) == {"done", "terminated"}

    @pytest.mark.parametrize("role", ["observation", "state"])
    def test_observation_and_state_accessors_are_composites(self, env, role):
        assert isinstance(getattr(env, f"{role}_spec"), Composite)

    def test_specs_carry_the_batch_size(self, env):
        assert env.action_spec.shape == torch.Size([4, 1])
        assert env.full_observation_spec.shape == torch.Size([4])

    @pytest.mark.parametrize(
        "name", ["action_spec", "full_action_spec", "observation_spec", "full_done_spec",
                 "reward_spec", "state_spec", "input_spec", "output_spec"]
    )
    def test_unbatched_views_drop_the_batch_dims(self, env, name):
        batched = getattr(env, name)
        unbatched = getattr(env, f"{name}_unbatched")
        assert unbatched.shape == batched.shape[1:]

    def test_assigning_an_unbatched_spec_adds_the_batch_dims(self, env):
        env.action_spec_unbatched = Bounded(low=-1.0, high=1.0, shape=(3,))
        assert env.action_spec.shape == torch.Size([4, 3])

    def test_assignment_updates_keys(self, env):
        env.action_spec = Composite(
            agents=Composite(action=Unbounded(shape=(4, 2, 3)), shape=(4, 2)), shape=(4,)
        )
        assert env.action_keys == [("agents", "action")]
        assert env.action_key == ("agents", "action")
        assert env.action_spec.shape == torch.Size([4, 2, 3])
        assert env.full_action_spec["agents", "action"] == env.action_spec

    def test_lone_done_is_flanked_by_terminated(self, env):
        env.done_spec = Categorical(2, shape=(4, 1), dtype=torch.bool)
        assert set(env.done_keys) == {"done", "terminated"}
        env.full_done_spec = Composite(
            agents=Composite(terminated=Categorical(2, shape=(4, 3, 1), dtype=torch.bool),
                             shape=(4, 3)),
            shape=(4,),
        )
        assert set(env.done_keys) == {("agents", "done"), ("agents", "terminated")}
        assert env.reset_keys == [("agents", "_reset")]

    def test_reset_keys_one_per_done_level(self, env):
        done = Categorical(2, shape=(4, 1), dtype=torch.bool)
        env.full_done_spec = Composite(done=done, nested=Composite(done=done, shape=(4,)),
                                       shape=(4,))
        assert env.reset_keys == ["_reset", ("nested", "_reset")]

    def test_specs_are_locked_by_default(self, env):
        assert env.is_spec_locked
        with pytest.raises(RuntimeError):
            env.full_observation_spec["other"] = Unbounded(shape=(4, 1))

    def test_unlocked_env_allows_in_place_edits(self):
        env = CountingEnv(batch_size=[4], spec_locked=False)
        env.full_observation_spec["other"] = Unbounded(shape=(4, 1))
        env.empty_cache()
        assert "other" in env.observation_keys

    def test_set_spec_lock_toggles_the_lock(self, env):
        env.set_spec_lock_(False)
        env.full_observation_spec["other"] = Unbounded(shape=(4, 1))
        env.set_spec_lock_(True)
        assert "other" in env.observation_keys
        with pytest.raises(RuntimeError):
            env.full_observation_spec["more"] = Unbounded(shape=(4, 1))

    def test_assignment_to_locked_env_relocks(self, env):
        env.observation_spec = Composite(obs=Unbounded(shape=(4, 2)), shape=(4,))
        assert env.is_spec_locked
        assert env.observation_keys == ["obs"]
        with pytest.raises(RuntimeError):
            env.full_observation_spec["x"] = Unbounded(shape=(4, 1))

    def test_wrong_batch_size_raises(self, env):
        with pytest.raises(ValueError, match=r"env batch size \(4,\).*got shape \(3, 1\)"):
            env.action_spec = Unbounded(shape=(3, 1))
        with pytest.raises(ValueError, match=r"full_observation spec must have"):
            env.observation_spec = Composite(obs=Unbounded(shape=(2,)))

    def test_leaf_observation_spec_is_stored_under_observation(self, env):
        env.observation_spec = Unbounded(shape=(4, 3))
        assert isinstance(env.observation_spec, Composite)
        assert env.observation_spec["observation"].shape == (4, 3)

    @pytest.mark.parametrize("name", ["full_observation_spec", "full_action_spec", "state_spec"])
    def test_leaf_where_composite_expected_raises(self, env, name):
        with pytest.raises(TypeError, match="must be a Composite"):
            setattr(env, name, Unbounded(shape=(4, 1)))

    def test_input_spec_assignment_rejects_unknown_keys(self, env):
        with pytest.raises(KeyError, match="accepts only the keys"):
            env.input_spec = Composite(other=Composite(shape=(4,)), shape=(4,))

    def test_output_spec_assignment_sets_roles(self, env):
        new = env.output_spec.clone()
        new.unlock_()
        new["full_observation_spec"] = Composite(z=Unbounded(shape=(4, 5)), shape=(4,))
        env.output_spec = new
        assert env.observation_keys == ["z"]

    def test_single_key_accessor_raises_with_several_keys(self, env):
        env.action_spec = Composite(a=Unbounded(shape=(4, 1)), b=Unbounded(shape=(4, 1)),
                                    shape=(4,))
        with pytest.raises(KeyError, match="action_key needs exactly one action entry"):
            _ = env.action_key
        assert isinstance(env.action_spec, Composite)

    def test_specs_property_groups_input_and_output(self, env):
        assert set(env.specs.keys()) == {"input_spec", "output_spec"}


class _EditsInPlace(EnvBase):
    """Sets its specs before ``super().__init__()`` and edits them in place after it."""

    def __init__(self):
        self.observation_spec = Composite(obs=Unbounded(shape=(2,)))
        self.action_spec = Unbounded(shape=(1,))
        super().__init__()
        self.full_done_spec["extra_flag"] = Categorical(2, shape=(1,), dtype=torch.bool)
        self.observation_spec["more"] = Unbounded(shape=(3,))

    def _reset(self, tensordict=None):
        return self.full_observation_spec.zero().update(self.full_done_spec.zero())

    def _step(self, tensordict):
        out = self.full_observation_spec.zero().update(self.full_done_spec.zero())
        return out.update(self.full_reward_spec.zero())

    def _set_seed(self, seed):
        return seed


class TestSpecLockTiming:
    def test_specs_set_before_super_init_are_kept(self):
        env = _EditsInPlace()
        assert env.action_spec.shape == (1,)
        assert set(env.observation_spec.keys()) == {"obs", "more"}

    def test_subclass_edits_specs_in_place_then_they_lock(self):
        env = _EditsInPlace()
        assert "extra_flag" in env.full_done_spec.keys()
        assert env.is_spec_locked
        with pytest.raises(RuntimeError, match="locked"):
            env.observation_spec["late"] = Unbounded(shape=(1,))
        check_env_specs(env)
