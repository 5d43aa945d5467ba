"""ObservationNorm, VecNorm, VecNormV2."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs_core import check_env_specs
from rl_specs import Bounded
from rl_transforms import Compose, ObservationNorm, StepCounter, TransformedEnv, VecNorm, VecNormV2


def _obs(values, key="observation"):
    value = torch.as_tensor(values, dtype=torch.float32)
    return TensorDict({key: value}, value.shape[:1])


class TestObservationNorm:
    @pytest.mark.parametrize("standard_normal", [True, False])
    def test_a_leaf_spec_is_transformed_directly(self, standard_normal):
        t = ObservationNorm(loc=0.5, scale=2.0, in_keys=["obs"], standard_normal=standard_normal)
        out = t.transform_observation_spec(Bounded(0.0, 1.0, shape=(3,)))
        low, high = (-0.25, 0.25) if standard_normal else (0.5, 2.5)
        assert isinstance(out, Bounded) and out.shape == (3,)
        assert torch.allclose(out.space.low, torch.full((3,), low))
        assert torch.allclose(out.space.high, torch.full((3,), high))

    @pytest.mark.parametrize("standard_normal, expected", [(False, [3.0, 5.0]), (True, [0.0, 0.5])])
    def test_affine(self, standard_normal, expected):
        t = ObservationNorm(loc=1.0, scale=2.0, standard_normal=standard_normal)
        assert t(_obs([1.0, 2.0]))["observation"].tolist() == expected

    @pytest.mark.parametrize("standard_normal", [False, True])
    def test_inverse_undoes_forward(self, standard_normal):
        t = ObservationNorm(
            loc=1.0, scale=2.0, in_keys_inv=["observation"], standard_normal=standard_normal
        )
        x = torch.tensor([0.5, -3.0])
        y = t._apply_transform(x)
        assert torch.allclose(t._inv_apply_transform(y), x)

    def test_uninitialized_raises(self):
        with pytest.raises(RuntimeError, match=r"ObservationNorm has no loc/scale yet"):
            ObservationNorm()(_obs([1.0]))

    def test_init_stats_standardises(self, counting_env):
        t = ObservationNorm(standard_normal=True)
        env = TransformedEnv(counting_env(max_steps=4), t)
        t.init_stats(num_iter=40)
        assert t.initialized
        values = env.rollout(40)["observation"]  # rollouts stop at done, as in init_stats
        assert values.mean().abs().item() < 0.2
        assert abs(values.std().item() - 1.0) < 0.2

    @pytest.mark.parametrize("standard_normal", [True, False])
    def test_init_stats_on_a_batched_env_is_per_feature(self, continuous_env, standard_normal):
        t = ObservationNorm(standard_normal=standard_normal)
        env = TransformedEnv(continuous_env(batch_size=[4]), t)
        t.init_stats(num_iter=80, reduce_dim=(0, 1), cat_dim=1)
        feature = env.base_env.observation_spec["observation"].shape[-1]
        assert t.loc.shape == t.scale.shape == (feature,)
        values = env.base_env.rollout(20)["observation"].reshape(-1, feature)
        normed = t._apply_transform(values)
        assert normed.mean(0).abs().max().item() < 1.0

    def test_init_stats_reduce_dim_zero_on_a_batched_env_keeps_time(self, counting_env):
        t = ObservationNorm(standard_normal=True)
        TransformedEnv(counting_env(batch_size=[3], max_steps=4), t)
        t.init_stats(num_iter=12)  # reduces the env batch dim only: one stat per time step
        assert t.loc.squeeze(-1).tolist() == [0.0, 1.0, 2.0, 3.0]

    def test_init_stats_keep_dims(self, counting_env):
        t = ObservationNorm(standard_normal=True)
        TransformedEnv(counting_env(max_steps=4), t)
        t.init_stats(num_iter=8, reduce_dim=(0, 1), cat_dim=0, keep_dims=(1,))
        assert t.loc.shape == (1,) and t.loc.item() == pytest.approx(1.5)

    @pytest.mark.parametrize(
        "kwargs, match",
        [
            ({"reduce_dim": (0, 1)}, "needs cat_dim when reduce_dim is not an int"),
            ({"reduce_dim": 0, "cat_dim": 1}, "cat_dim to be part of reduce_dim"),
            ({"reduce_dim": 0, "keep_dims": (1,)}, "keep_dims within"),
        ],
    )
    def test_init_stats_bad_dims_raise(self, counting_env, kwargs, match):
        t = ObservationNorm()
        TransformedEnv(counting_env(), t)
        with pytest.raises(ValueError, match=match):
            t.init_stats(4, **kwargs)

    def test_init_stats_twice_raises(self, counting_env):
        t = ObservationNorm(loc=0.0, scale=1.0)
        TransformedEnv(counting_env(), t)
        with pytest.raises(RuntimeError, match="already initialized"):
            t.init_stats(4)

    def test_init_stats_without_parent_raises(self):
        with pytest.raises(RuntimeError, match=r"init_stats needs the transform in an env"):
            ObservationNorm().init_stats(3)

    def test_init_stats_with_several_keys_needs_key(self, counting_env):
        t = ObservationNorm(in_keys=["observation", "other"])
        TransformedEnv(counting_env(), t)
        with pytest.raises(ValueError, match=r"needs key= when there are several in_keys"):
            t.init_stats(3)

    def test_bounded_spec_is_mapped(self, continuous_env):
        env = TransformedEnv(
            continuous_env(dtype=torch.float32),
            ObservationNorm(loc=1.0, scale=2.0, in_keys_inv=["action"], standard_normal=True),
        )
        spec = env.action_spec
        assert isinstance(spec, Bounded)
        assert spec.low.flatten()[0].item() == -1.0 and spec.high.flatten()[0].item() == 0.0

    def test_check_env_specs(self, counting_env):
        check_env_specs(
            TransformedEnv(counting_env(), Compose(StepCounter(), ObservationNorm(0.5, 2.0)))
        )


class TestVecNorm:
    def test_normalises_running_statistics(self):
        t = VecNorm(in_keys=["observation"], decay=1.0)
        out = t(_obs([[1.0], [3.0]]))["observation"].squeeze(-1)
        assert torch.allclose(out, torch.tensor([-1.0, 1.0]), atol=1e-4)

    def test_freeze_stops_updates(self):
        t = VecNorm(in_keys=["observation"], decay=1.0)
        t(_obs([[1.0], [3.0]]))
        t.freeze()
        first = t(_obs([[100.0]]))["observation"].item()
        second = t(_obs([[100.0]]))["observation"].item()
        assert first == second
        t.unfreeze()
        assert t(_obs([[100.0]]))["observation"].item() != second

    def test_clone_and_frozen_copy_share_statistics(self):
        t = VecNorm(in_keys=["observation"], decay=1.0)
        t(_obs([[1.0], [3.0]]))
        frozen = t.frozen_copy()
        t(_obs([[5.0], [7.0]]))
        assert frozen.frozen and frozen._td is t._td
        assert t.clone()._td is t._td

    def test_state_dict_round_trip(self):
        t = VecNorm(in_keys=["observation"], decay=1.0)
        t(_obs([[1.0], [3.0]]))
        other = VecNorm(in_keys=["observation"], decay=1.0)
        other.load_state_dict(t.state_dict())
        other.freeze()
        assert other(_obs([[3.0]]))["observation"].item() == pytest.approx(1.0, abs=1e-4)

    def test_shared_td(self):
        shared = TensorDict()
        a = VecNorm(in_keys=["observation"], shared_td=shared, decay=1.0)
        b = VecNorm(in_keys=["observation"], shared_td=shared, decay=1.0)
        a(_obs([[1.0], [3.0]]))
        assert b.freeze()(_obs([[3.0]]))["observation"].item() == pytest.approx(1.0, abs=1e-4)

    def test_to_observation_norm(self):
        t = VecNorm(in_keys=["observation"], decay=1.0)
        t(_obs([[1.0], [3.0]]))
        norm = t.to_observation_norm()
        assert norm(_obs([[3.0]]))["observation"].item() == pytest.approx(1.0, abs=1e-4)

    def test_bad_decay_raises(self):
        with pytest.raises(ValueError, match=r"VecNorm expected 0 < decay <= 1"):
            VecNorm(decay=1.5)

    def test_check_env_specs(self, counting_env):
        env = TransformedEnv(
            counting_env(batch_size=[2]), VecNorm(in_keys=["observation", "reward"])
        )
        check_env_specs(env)
        assert env.rollout(3)["next", "observation"].isfinite().all()


class TestVecNormV2:
    def test_observation_centred_reward_scaled_only(self):
        t = VecNormV2(in_keys=["observation", "reward"], decay=1.0)
        td = TensorDict(
            {"observation": torch.tensor([[1.0], [3.0]]), "reward": torch.tensor([[1.0], [3.0]])},
            [2],
        )
        out = t(td)
        assert torch.allclose(out["observation"].squeeze(-1), torch.tensor([-1.0, 1.0]), atol=1e-4)
        assert (out["reward"] > 0).all()

    def test_stateless_mode_rejected(self):
        with pytest.raises(ValueError, match=r"VecNormV2 supports stateful=True only"):
            VecNormV2(in_keys=["observation"], stateful=False)

    def test_check_env_specs(self, counting_env):
        check_env_specs(
            TransformedEnv(counting_env(), VecNormV2(in_keys=["observation", "reward"]))
        )


@pytest.mark.parametrize("new_api, cls", [(True, VecNormV2), (False, VecNorm), (None, VecNorm)])
def test_vecnorm_new_api_picks_the_class(new_api, cls):
    t = VecNorm(in_keys=["obs"], decay=1.0, new_api=new_api)
    assert type(t) is cls
    out = t(TensorDict({"obs": torch.tensor([[1.0], [3.0]])}, [2]))["obs"].squeeze(-1)
    assert out.tolist() == pytest.approx([-1.0, 1.0], abs=1e-3)


class TestRunningStatsHelpers:
    def _two_keys(self, cls=VecNorm):
        return cls(in_keys=["a", ("b", "c")], out_keys=["a_n", ("b", "c_n")], decay=1.0)

    def _data(self, shift=0.0):
        return TensorDict({"a": torch.arange(4.0) + shift, ("b", "c"): torch.ones(4) * 2}, [4])

    def test_loc_and_scale_are_per_key_tensordicts(self):
        t = self._two_keys()
        t(self._data())
        assert t.loc["a"].item() == pytest.approx(1.5)
        assert t.scale["a"].item() == pytest.approx(torch.arange(4.0).std(unbiased=False).item())
        assert t.scale["b", "c"].item() == pytest.approx(t.eps)  # constant data: floor at eps
        assert t.loc["a"].dtype == torch.get_default_dtype()

    @pytest.mark.parametrize("cls", [VecNorm, VecNormV2])
    def test_denorm_recovers_the_input(self, cls):
        t = cls(in_keys=["observation"], decay=1.0)
        data = _obs([[1.0], [4.0], [-2.0]])
        normed = t(data.clone())
        assert not torch.allclose(normed["observation"], data["observation"])
        back = t.denorm(normed)
        assert torch.allclose(back["observation"], data["observation"], atol=1e-5)

    def test_reward_denorm_only_rescales_in_v2(self):
        t = VecNormV2(in_keys=["reward"], decay=1.0)
        data = _obs([[1.0], [3.0]], key="reward")
        back = t.denorm(t(data.clone()))
        assert torch.allclose(back["reward"], data["reward"], atol=1e-5)

    @pytest.mark.parametrize("what", ["frozen_copy", "denorm", "loc"])
    def test_uninitialized_helpers_raise(self, what):
        t = VecNorm(in_keys=["observation"])
        with pytest.raises(RuntimeError, match="Make sure the VecNorm has been initialized"):
            getattr(t, what)() if what == "frozen_copy" else (
                t.denorm(_obs([[0.0]])) if what == "denorm" else t.loc
            )

    def test_to_observation_norm_with_several_keys_is_a_compose(self):
        t = self._two_keys()
        expected = t(self._data())
        fixed = t.to_observation_norm()
        assert isinstance(fixed, Compose) and len(fixed) == 2
        t.freeze()
        out = fixed(self._data())
        assert torch.allclose(out["a_n"], expected["a_n"])
        assert torch.allclose(out["b", "c_n"], expected["b", "c_n"])

    def test_clone_inside_a_compose_shares_the_statistics(self):
        chain = Compose(self._two_keys())
        chain(self._data())
        twin = chain.clone()
        assert twin[0]._td is chain[0]._td

    def test_state_dict_of_an_uninitialized_norm_warns(self):
        with pytest.warns(UserWarning, match="Querying state_dict on an uninitialized VecNorm"):
            VecNorm(in_keys=["a"]).state_dict()

    @pytest.mark.parametrize("cls, error", [(VecNorm, KeyError), (VecNormV2, RuntimeError)])
    def test_loading_a_void_state_dict_into_an_initialized_norm_raises(self, cls, error):
        with pytest.warns(UserWarning):
            empty = cls(in_keys=["a"]).state_dict()
        t = cls(in_keys=["a"])
        t(self._data())
        with pytest.raises(error, match="void state-dict while the instance is initialized"):
            t.load_state_dict(empty)

    def test_loading_into_a_fresh_norm_warns_it_is_not_shared(self):
        t = VecNorm(in_keys=["a"], decay=1.0)
        t(self._data())
        fresh = VecNorm(in_keys=["a"], decay=1.0)
        with pytest.warns(UserWarning, match="VecNorm wasn't initialized"):
            fresh.load_state_dict(t.state_dict())
        assert fresh.loc["a"].item() == pytest.approx(1.5)

    def test_transform_output_spec_leaves_a_locked_spec_alone(self, counting_env):
        env = counting_env()
        t = VecNormV2(in_keys=["observation"], out_keys=["obs_n"])
        out = t.transform_output_spec(env.output_spec)
        assert ("full_observation_spec", "obs_n") in out.keys(True)
        assert "obs_n" not in env.output_spec["full_observation_spec"].keys()
