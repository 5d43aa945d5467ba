"""TransformedEnv: specs, steps, resets, attribute forwarding, chain edits."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs_core import PendulumEnv, check_env_specs, step_mdp
from rl_specs import Unbounded
from rl_transforms import (
    Compose,
    DoubleToFloat,
    InitTracker,
    ObservationNorm,
    RenameTransform,
    RewardSum,
    StepCounter,
    TensorDictPrimer,
    TrajCounter,
    Transform,
    TransformedEnv,
    auto_unwrap_transformed_env,
    set_auto_unwrap_transformed_env,
)


class AddOne(Transform):
    def _apply_transform(self, obs):
        return obs + 1


class SkipStep(Transform):
    """Writes ``_step=False`` on the inverse path: the base env must not step."""

    def _inv_call(self, tensordict):
        return tensordict.set("_step", torch.zeros(tensordict.batch_size, dtype=torch.bool))


class TestTransformedEnv:
    def test_base_env_must_be_an_env(self):
        with pytest.raises(TypeError, match=r"TransformedEnv expected base_env to be an EnvBase"):
            TransformedEnv(object())

    def test_defaults_to_an_empty_compose(self, counting_env):
        env = TransformedEnv(counting_env())
        assert isinstance(env.transform, Compose) and len(env.transform) == 0
        assert (env.rollout(2)["next", "observation"].squeeze(-1) == torch.tensor([1.0, 2.0])).all()

    def test_plain_callable_as_transform(self, counting_env):
        def double(td):
            return td.set("observation", td.get("observation") * 2)

        env = TransformedEnv(counting_env(), double)
        assert env.rollout(2)["next", "observation"].squeeze(-1).tolist() == [2.0, 4.0]

    def test_inherits_device_and_batch_size(self, counting_env):
        base = counting_env(batch_size=[3], device="cpu")
        env = TransformedEnv(base, StepCounter())
        assert env.device == base.device and env.batch_size == torch.Size([3])

    def test_forwards_attributes_of_base_env(self, counting_env):
        env = TransformedEnv(counting_env(max_steps=7), StepCounter())
        assert env.max_steps == 7
        with pytest.raises(AttributeError):
            env.no_such_attribute

    def test_step_applies_transform(self, counting_env):
        env = TransformedEnv(counting_env(), AddOne(in_keys=["observation"]))
        td = env.reset()
        assert td["observation"].item() == 1.0
        assert env.rand_step(td)["next", "observation"].item() == 2.0

    def test_inverse_runs_before_base_step(self, continuous_env):
        base = continuous_env()
        env = TransformedEnv(base, DoubleToFloat(in_keys_inv=["action"]))
        assert env.action_spec.dtype == torch.float32
        assert env.observation_spec["observation"].dtype == torch.float32
        td = env.rand_step(env.reset())
        assert base.last_action.dtype == torch.float64
        assert td["action"].dtype == torch.float32

    def test_exposes_out_keys_inv_action(self, continuous_env):
        env = TransformedEnv(
            continuous_env(), RenameTransform([], [], in_keys_inv=["action"], out_keys_inv=["act"])
        )
        assert env.action_keys == ["act"]
        assert "act" in env.rand_action().keys()
        check_env_specs(env)

    def test_missing_inverse_key_raises(self, continuous_env):
        env = TransformedEnv(continuous_env(), DoubleToFloat(in_keys_inv=["nope"]))
        with pytest.raises(
            KeyError, match=r"DoubleToFloat expected the entry 'nope'.*out_keys_inv"
        ):
            env.rand_step(env.reset())

    def test_key_absent_from_parent_raises(self, counting_env):
        env = TransformedEnv(counting_env(), AddOne(in_keys=["pixels"]))
        with pytest.raises(KeyError, match=r"AddOne expected the entry 'pixels'"):
            env.rollout(2)

    def test_transform_reused_on_second_env_raises(self, counting_env):
        env = TransformedEnv(counting_env(), Compose(StepCounter(), RewardSum()))
        with pytest.raises(ValueError, match=r"RewardSum already belongs to a Compose.*clone"):
            TransformedEnv(counting_env(), env.transform[1])
        other = TransformedEnv(counting_env(), env.transform[1].clone())
        assert "episode_reward" in other.rollout(2)["next"].keys()

    def test_append_and_insert_update_specs(self, counting_env):
        env = TransformedEnv(counting_env(), StepCounter())
        assert env.append_transform(RewardSum()) is env
        assert isinstance(env.transform, Compose) and len(env.transform) == 2
        env.insert_transform(0, AddOne(in_keys=["observation"], out_keys=["obs1"]))
        assert {"step_count", "episode_reward", "obs1"} <= set(env.observation_spec.keys())
        assert env.rollout(2)["next", "obs1"].squeeze(-1).tolist() == [2.0, 3.0]

    def test_transform_setter_replaces_the_chain(self, counting_env):
        env = TransformedEnv(counting_env(), StepCounter())
        old = env.transform
        env.transform = RewardSum()
        assert old.parent is None
        assert "episode_reward" in env.observation_spec.keys()
        assert "step_count" not in env.observation_spec.keys()

    def test_auto_unwrap_flattens_nested_envs(self, counting_env):
        base = counting_env()
        inner = TransformedEnv(base, StepCounter())
        env = TransformedEnv(inner, RewardSum())
        assert env.base_env is base
        assert [type(t) for t in env.transform] == [StepCounter, RewardSum]
        nested = TransformedEnv(inner, RewardSum(), auto_unwrap=False)
        assert nested.base_env is inner

    def test_set_auto_unwrap_false_keeps_nesting_inside_the_block_only(self, counting_env):
        inner = TransformedEnv(counting_env(), StepCounter())
        with set_auto_unwrap_transformed_env(False):
            assert auto_unwrap_transformed_env() is False
            assert TransformedEnv(inner, RewardSum()).base_env is inner
            # an explicit argument wins over the switch
            assert TransformedEnv(inner, auto_unwrap=True).base_env is inner.base_env
        assert auto_unwrap_transformed_env() is True
        assert auto_unwrap_transformed_env(allow_none=True) is None
        assert TransformedEnv(inner, RewardSum()).base_env is inner.base_env

    def test_set_auto_unwrap_works_as_a_decorator_and_rejects_bad_env_values(self, monkeypatch):
        @set_auto_unwrap_transformed_env(False)
        def read():
            return auto_unwrap_transformed_env()

        assert read() is False
        monkeypatch.setenv("AUTO_UNWRAP_TRANSFORMED_ENV", "maybe")
        with pytest.raises(ValueError, match="AUTO_UNWRAP_TRANSFORMED_ENV"):
            auto_unwrap_transformed_env()

    def test_partial_step_skips_base_step(self, counting_env):
        base = counting_env()
        env = TransformedEnv(base, SkipStep())
        td = env.rand_step(env.reset())
        assert base.count.item() == 0
        assert td["next", "observation"].item() == 0.0

    def test_partial_reset_keeps_other_counters(self, counting_env):
        env = TransformedEnv(counting_env(max_steps=10, batch_size=[2]), StepCounter())
        td = env.reset()
        for _ in range(3):
            td = step_mdp(env.rand_step(td))
        td.set("_reset", torch.tensor([[True], [False]]))
        out = env.reset(td)
        assert out["step_count"].squeeze(-1).tolist() == [0, 3]

    def test_set_seed_delegates(self, counting_env):
        env = TransformedEnv(counting_env(), StepCounter())
        assert env.set_seed(3) == counting_env().set_seed(3)

    def test_state_dict_holds_transform_buffers(self, counting_env):
        env = TransformedEnv(counting_env(), ObservationNorm(loc=1.0, scale=2.0))
        assert {"transform.loc", "transform.scale"} <= set(env.state_dict().keys())

    def test_to_moves_and_recomputes(self, counting_env):
        env = TransformedEnv(counting_env(), ObservationNorm(loc=1.0, scale=2.0))
        assert env.to("cpu") is env
        assert env.observation_spec["observation"].device in (None, torch.device("cpu"))

    def test_close_closes_base(self, counting_env):
        base = counting_env()
        env = TransformedEnv(base)
        env.close()
        assert base.is_closed and env.is_closed

    def test_reset_without_tensordict_gives_transforms_an_input(self, counting_env):
        env = TransformedEnv(counting_env(batch_size=[2]), StepCounter())
        assert env.reset()["step_count"].shape == torch.Size([2, 1])

    def test_batch_unlocked_env_takes_the_data_batch(self):
        env = TransformedEnv(
            PendulumEnv(),
            Compose(
                StepCounter(3),
                RewardSum(),
                InitTracker(),
                TrajCounter(),
                TensorDictPrimer(h=Unbounded(shape=(2,))),
            ),
        )
        td = env.reset(env.gen_params(batch_size=[4]))
        assert td["step_count"].shape == torch.Size([4, 1]) and td["h"].shape == torch.Size([4, 2])
        data = env.rollout(5, tensordict=td)
        assert data.batch_size == torch.Size([4, 3])
        assert data["next", "step_count"][0].squeeze(-1).tolist() == [1, 2, 3]

    def test_check_env_specs_with_chain(self, counting_env):
        env = TransformedEnv(
            counting_env(batch_size=[2]),
            Compose(
                StepCounter(3), RewardSum(), DoubleToFloat(), ObservationNorm(loc=0.0, scale=1.0)
            ),
        )
        check_env_specs(env)
        assert isinstance(env.rollout(2), TensorDict)


class TestAppendTransformOnEnvBase:
    def test_plain_env_append_transform_returns_a_transformed_env(self):
        from rl_envs_core.testing import CountingEnv

        base = CountingEnv(max_steps=3)
        env = base.append_transform(StepCounter())
        assert isinstance(env, TransformedEnv) and env.base_env is base
        assert env.rollout(5)["next", "step_count"].squeeze(-1).tolist() == [1, 2, 3]

    def test_transformed_env_append_transform_extends_its_own_chain(self):
        from rl_envs_core.testing import CountingEnv

        env = TransformedEnv(CountingEnv(), StepCounter())
        assert env.append_transform(RewardSum()) is env
        assert "episode_reward" in env.observation_spec.keys()


class TestTransformLikeModules:
    def test_dreamer_decoder_finds_the_dreamer_env_through_transformed_env(self):
        from tensordict.nn import TensorDictModule

        from rl_envs_core import DreamerDecoder, DreamerEnv
        from rl_specs import Bounded

        prior = TensorDictModule(
            lambda state, belief, action: (state + action, belief + 1, state.sum(-1, keepdim=True)),
            in_keys=["state", "belief", "action"],
            out_keys=["state", "belief", "reward"],
        )
        decoder = TensorDictModule(
            lambda s, b: torch.cat([s, b], -1), in_keys=["state", "belief"], out_keys=["pixels"]
        )
        base = DreamerEnv(prior, prior_shape=(2,), belief_shape=(3,), obs_decoder=decoder)
        base.action_spec = Bounded(-1.0, 1.0, shape=(2,))
        record = DreamerDecoder()
        TransformedEnv(base, Compose(StepCounter(), record))
        data = base.rollout(3)
        decoded = record(data["next"].clone())  # the decoder of the env it is attached to
        expected = torch.cat([data["next", "state"], data["next", "belief"]], -1)
        assert torch.equal(decoded["pixels"], expected)


def test_device_keyword_moves_the_base_env(counting_env):
    env = TransformedEnv(counting_env(), StepCounter(), device="cpu")
    assert env.device == torch.device("cpu")
    assert env.base_env.device == torch.device("cpu")
    assert env.rollout(2)["next", "step_count"].device == torch.device("cpu")


def test_transforms_join_the_env_in_eval_mode(counting_env):
    env = TransformedEnv(counting_env(), AddOne())
    assert not env.transform.training
    env.append_transform(AddOne())
    env.insert_transform(0, AddOne())
    assert not any(t.training for t in env.transform)
    env.train()
    assert env.transform.training and all(t.training for t in env.transform)
    env.eval()
    assert not any(t.training for t in env.transform)
