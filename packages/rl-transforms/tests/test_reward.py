"""RewardClipping, RewardScaling, BinarizeReward."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs_core import check_env_specs
from rl_specs import Binary, Bounded
from rl_transforms import (
    BinarizeReward,
    LineariseRewards,
    Reward2GoTransform,
    RewardClipping,
    RewardScaling,
    TransformedEnv,
)


def _reward(*values):
    return TensorDict({"reward": torch.tensor(values)})


class TestRewardClipping:
    @pytest.mark.parametrize(
        "low, high, expected",
        [
            (-1.0, 1.0, [1.0, -1.0, 0.5]),
            (None, 1.0, [1.0, -5.0, 0.5]),
            (0.0, None, [3.0, 0.0, 0.5]),
        ],
    )
    def test_clips(self, low, high, expected):
        assert RewardClipping(low, high)(_reward(3.0, -5.0, 0.5))["reward"].tolist() == expected

    def test_no_bound_raises(self):
        with pytest.raises(ValueError, match=r"RewardClipping expected at least one of clamp_min"):
            RewardClipping()

    def test_swapped_bounds_raise(self):
        with pytest.raises(ValueError, match=r"RewardClipping expected clamp_min <= clamp_max"):
            RewardClipping(1.0, -1.0)

    def test_spec_becomes_bounded(self, counting_env):
        env = TransformedEnv(counting_env(), RewardClipping(-0.5, 0.5))
        assert isinstance(env.reward_spec, Bounded)
        assert env.rollout(2)["next", "reward"].max().item() == 0.5

    def test_check_env_specs(self, counting_env):
        check_env_specs(TransformedEnv(counting_env(), RewardClipping(0.0, 0.5)))


class TestRewardScaling:
    @pytest.mark.parametrize("standard_normal, expected", [(False, 5.0), (True, 0.5)])
    def test_affine(self, standard_normal, expected):
        t = RewardScaling(loc=1.0, scale=2.0, standard_normal=standard_normal)
        assert t(_reward(2.0))["reward"].item() == expected

    def test_zero_scale_raises(self):
        with pytest.raises(ValueError, match=r"RewardScaling expected a non-zero scale"):
            RewardScaling(0.0, 0.0)

    def test_buffers_in_state_dict(self):
        assert set(RewardScaling(0.0, 2.0).state_dict()) == {"loc", "scale"}

    def test_check_env_specs(self, counting_env):
        env = TransformedEnv(counting_env(), RewardScaling(1.0, 3.0))
        assert env.rollout(1)["next", "reward"].item() == 4.0
        check_env_specs(env)


class TestBinarizeReward:
    def test_binarizes(self):
        out = BinarizeReward()(_reward(-1.0, 0.0, 2.0))["reward"]
        assert out.tolist() == [0, 0, 1] and out.dtype == torch.int8

    def test_out_keys(self):
        out = BinarizeReward(out_keys=["binary"])(_reward(1.0))
        assert out["binary"].item() == 1 and out["reward"].item() == 1.0

    def test_spec_is_binary(self, counting_env):
        env = TransformedEnv(counting_env(), BinarizeReward())
        assert isinstance(env.reward_spec, Binary) and env.reward_spec.dtype == torch.int8

    def test_check_env_specs(self, counting_env):
        check_env_specs(TransformedEnv(counting_env(batch_size=[2]), BinarizeReward()))


class TestLineariseRewards:
    def test_weighted_sum(self):
        t = LineariseRewards(in_keys=["reward"], weights=[1.0, -2.0])
        assert t(TensorDict({"reward": torch.tensor([[3.0, 1.0]])}, [1]))["reward"].tolist() == [
            [1.0]
        ]

    def test_default_weights_sum(self):
        t = LineariseRewards(in_keys=["r"], out_keys=["total"])
        out = t(TensorDict({"r": torch.tensor([[1.0, 2.0, 3.0]])}, [1]))
        assert out["total"].tolist() == [[6.0]] and out["r"].shape == torch.Size([1, 3])

    def test_bad_weights_raise(self):
        with pytest.raises(ValueError, match=r"LineariseRewards expected one weight per objective"):
            LineariseRewards(in_keys=["r"], weights=[[1.0]])

    def test_check_env_specs(self, counting_env):
        env = TransformedEnv(counting_env(), LineariseRewards(in_keys=["reward"], weights=[3.0]))
        assert env.rollout(1)["next", "reward"].item() == 3.0
        check_env_specs(env)


@pytest.mark.parametrize(
    "weights, low, high",
    [(None, -3.0, 3.0), ([1.0, 0.0], -1.0, 1.0), ([1.0, -1.0], -3.0, 3.0), ([2.0, 1.0], -4.0, 4.0)],
)
def test_linearised_bounded_rewards_stay_bounded(weights, low, high):
    spec = Bounded(low=torch.tensor([-1.0, -2.0]), high=torch.tensor([1.0, 2.0]), shape=(2,))
    out = LineariseRewards(in_keys=["reward"], weights=weights).transform_reward_spec(spec)
    assert isinstance(out, Bounded) and out.shape == (1,)
    assert out.space.low.item() == low and out.space.high.item() == high


class TestReward2GoTransform:
    def test_discounted_returns_restart_after_done(self):
        traj = TensorDict(
            {
                "next": {
                    "reward": torch.ones(4, 1),
                    "done": torch.tensor([[False], [True], [False], [False]]),
                }
            },
            [4],
        )
        out = Reward2GoTransform(gamma=0.5).inv(traj)
        assert out["reward_to_go"].squeeze(-1).tolist() == [1.5, 1.0, 1.5, 1.0]
        assert "reward_to_go" not in traj.keys()

    def test_batched_trajectories(self):
        traj = TensorDict(
            {
                "next": {
                    "reward": torch.ones(2, 3, 1),
                    "done": torch.zeros(2, 3, 1, dtype=torch.bool),
                }
            },
            [2, 3],
        )
        out = Reward2GoTransform(gamma=1.0).inv(traj)
        assert out["reward_to_go"].squeeze(-1).tolist() == [[3.0, 2.0, 1.0], [3.0, 2.0, 1.0]]

    def test_time_is_the_rewards_second_to_last_dim_whatever_the_batch_dims(self):
        # batch [2] only: the time dim (3) and the 2 reward features are not batch dims
        traj = TensorDict(
            {"next": {"reward": torch.ones(2, 3, 2),
                      "done": torch.tensor([[0, 1, 0], [0, 0, 0]]).bool().unsqueeze(-1)}},
            [2],
        )
        out = Reward2GoTransform(gamma=1.0).inv(traj)["reward_to_go"]
        assert out.shape == (2, 3, 2)
        assert out[..., 0].tolist() == [[2.0, 1.0, 1.0], [3.0, 2.0, 1.0]]
        assert torch.equal(out[..., 0], out[..., 1])

    def test_forward_is_identity(self):
        td = TensorDict({"a": torch.zeros(1)})
        assert Reward2GoTransform()(td) is td

    def test_env_use_raises(self, counting_env):
        with pytest.raises(RuntimeError, match=r"Reward2GoTransform needs whole trajectories"):
            TransformedEnv(counting_env(), Reward2GoTransform())

    def test_missing_reward_raises(self):
        with pytest.raises(KeyError, match=r"Reward2GoTransform expected the entry .*next.*reward"):
            Reward2GoTransform().inv(
                TensorDict({"next": {"done": torch.zeros(1, dtype=torch.bool)}})
            )
