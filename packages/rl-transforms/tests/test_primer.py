"""TensorDictPrimer."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs_core import check_env_specs, step_mdp
from rl_specs import Bounded, Composite, Unbounded
from rl_transforms import TensorDictPrimer, TransformedEnv, gSDENoise


class TestTensorDictPrimer:
    def test_default_zero_expanded_to_batch(self, counting_env):
        env = TransformedEnv(
            counting_env(batch_size=[2]), TensorDictPrimer(hidden=Unbounded(shape=(3,)))
        )
        td = env.reset()
        assert td["hidden"].shape == torch.Size([2, 3]) and (td["hidden"] == 0).all()
        assert env.observation_spec["hidden"].shape == torch.Size([2, 3])
        assert "hidden" in env.full_state_spec.keys()

    @pytest.mark.parametrize(
        "default, expected", [(2.0, 2.0), (lambda: torch.tensor(5.0), 5.0), ({"h": 7.0}, 7.0)]
    )
    def test_default_values(self, counting_env, default, expected):
        env = TransformedEnv(
            counting_env(), TensorDictPrimer(h=Unbounded(shape=(2,)), default_value=default)
        )
        assert env.reset()["h"].tolist() == [expected, expected]

    def test_random_values_within_spec(self, counting_env):
        primer = TensorDictPrimer(h=Bounded(5.0, 6.0, shape=(4,)), random=True)
        env = TransformedEnv(counting_env(), primer)
        value = env.reset()["h"]
        assert ((value >= 5.0) & (value <= 6.0)).all()

    def test_carried_over_steps(self, counting_env):
        env = TransformedEnv(
            counting_env(), TensorDictPrimer(h=Unbounded(shape=(1,)), default_value=3.0)
        )
        td = env.reset()
        td = step_mdp(env.rand_step(td))
        assert td["h"].item() == 3.0

    def test_composite_primers(self, counting_env):
        primer = TensorDictPrimer(Composite(a=Unbounded(shape=(1,)), b=Unbounded(shape=(2,))))
        assert primer.out_keys == ["a", "b"]

    def test_forward_fills_missing_only(self):
        primer = TensorDictPrimer(h=Unbounded(shape=(2,)), default_value=1.0)
        out = primer(TensorDict({"x": torch.zeros(3)}, [3]))
        assert out["h"].shape == torch.Size([3, 2])
        kept = primer(TensorDict({"h": torch.full((3, 2), 9.0)}, [3]))
        assert (kept["h"] == 9.0).all()

    def test_random_with_a_zero_default_draws_values(self, counting_env):
        primer = TensorDictPrimer(h=Bounded(5.0, 6.0, shape=(4,)), random=True, default_value=0.0)
        env = TransformedEnv(counting_env(), primer)
        assert (env.reset()["h"] >= 5.0).all()

    def test_random_and_default_raise(self):
        with pytest.raises(
            ValueError, match=r"TensorDictPrimer got random=True and a default_value"
        ):
            TensorDictPrimer(h=Unbounded(shape=(1,)), random=True, default_value=1.0)

    def test_non_spec_raises(self):
        with pytest.raises(TypeError, match=r"TensorDictPrimer expected a TensorSpec for 'h'"):
            TensorDictPrimer(h=3)

    def test_check_env_specs(self, counting_env):
        check_env_specs(
            TransformedEnv(counting_env(batch_size=[2]), TensorDictPrimer(h=Unbounded(shape=(3,))))
        )


class TestgSDENoise:
    def test_random_normal_noise_of_the_right_shape(self, counting_env):
        env = TransformedEnv(counting_env(batch_size=[5]), gSDENoise(state_dim=3, action_dim=2))
        a, b = env.reset()["_eps_gSDE"], env.reset()["_eps_gSDE"]
        assert a.shape == torch.Size([5, 2, 3]) and not torch.equal(a, b)

    def test_lazy_shape_without_dims(self):
        assert gSDENoise().primers["_eps_gSDE"].shape == torch.Size([1])

    def test_one_dim_only_raises(self):
        with pytest.raises(
            ValueError, match=r"gSDENoise expected both state_dim and action_dim or neither"
        ):
            gSDENoise(state_dim=3)

    def test_check_env_specs(self, counting_env):
        check_env_specs(TransformedEnv(counting_env(), gSDENoise(state_dim=2, action_dim=1)))

    @pytest.mark.parametrize("shape", [(), (2,)])
    def test_expanded_specs_agree_between_state_and_observation(self, counting_env, shape):
        t = gSDENoise(state_dim=3, action_dim=2, shape=shape, expand_specs=True)
        env = TransformedEnv(counting_env(batch_size=[2]), t)
        assert env.state_spec["_eps_gSDE"].shape == env.observation_spec["_eps_gSDE"].shape
        check_env_specs(env)

    def test_outside_an_env_the_shape_is_the_batch(self):
        t = gSDENoise(state_dim=3, action_dim=2, shape=(4,))
        out = t(TensorDict({"a": torch.zeros(4)}, [4]))
        assert out["_eps_gSDE"].shape == (4, 2, 3)
        wider = t(TensorDict({"a": torch.zeros(5)}, [5]))
        assert wider["_eps_gSDE"].shape == (5, 4, 2, 3)
