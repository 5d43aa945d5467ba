"""KLRewardTransform: reward - coef * KL[pi || pi_0]."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import (
    NormalParamExtractor,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
)

from rl_envs_core.testing import CountingEnv
from rl_transforms import KLRewardTransform, TransformedEnv


def _actor(in_features=1, action_dim=1):
    torch.manual_seed(0)
    net = TensorDictModule(
        torch.nn.Sequential(torch.nn.Linear(in_features, 2 * action_dim), NormalParamExtractor()),
        ["observation"],
        ["loc", "scale"],
    )
    return ProbabilisticTensorDictSequential(
        net,
        ProbabilisticTensorDictModule(
            ["loc", "scale"],
            ["action"],
            distribution_class=torch.distributions.Normal,
            return_log_prob=True,
        ),
    )


def _transition(actor, n=4, in_features=1):
    td = actor(TensorDict(observation=torch.randn(n, in_features), batch_size=[n]))
    td["next"] = TensorDict(reward=torch.ones(n, 1), batch_size=[n])
    return td


def _move(actor):
    with torch.no_grad():
        actor.module[0].module[0].bias.add_(0.5)


class TestKLRewardTransform:
    def test_no_penalty_while_the_actor_is_unchanged(self):
        actor = _actor()
        out = KLRewardTransform(actor)(_transition(actor))
        torch.testing.assert_close(out["next", "reward"], torch.ones(4, 1))

    def test_penalty_is_coef_times_the_log_ratio(self):
        actor = _actor()
        t = KLRewardTransform(actor, coef=0.3)
        reference = TensorDict.from_module(actor).clone()
        _move(actor)
        td = _transition(actor)
        with torch.no_grad(), reference.to_module(actor):
            ref_lp = actor.get_dist(td.select("observation")).log_prob(td["action"])
        expected = 1.0 - 0.3 * (td["action_log_prob"] - ref_lp)
        torch.testing.assert_close(t(td)["next", "reward"], expected.detach())

    def test_log_prob_is_computed_when_missing(self):
        actor = _actor()
        t = KLRewardTransform(actor)
        _move(actor)
        td = _transition(actor)
        expected = t(td.clone())["next", "reward"]
        missing = td.exclude("action_log_prob")
        torch.testing.assert_close(t(missing)["next", "reward"], expected)

    def test_multi_dim_actions_sum_over_action_dims(self):
        actor = _actor(in_features=3, action_dim=2)
        t = KLRewardTransform(actor)
        _move(actor)
        out = t(_transition(actor, in_features=3))
        assert out["next", "reward"].shape == (4, 1)

    def test_out_key_keeps_the_original_reward(self):
        actor = _actor()
        t = KLRewardTransform(actor, in_keys=["reward"], out_keys=["reward_kl"])
        _move(actor)
        out = t(_transition(actor))
        assert out["next", "reward"].eq(1).all()
        assert not out["next", "reward_kl"].eq(1).all()

    def test_in_an_env(self):
        actor = _actor()
        env = TransformedEnv(
            CountingEnv(max_steps=10), KLRewardTransform(actor, out_keys=["kl_reward"])
        )
        assert "kl_reward" in env.full_reward_spec.keys()
        _move(actor)

        def policy(td):
            td = td.set("observation", td["observation"].float())
            out = actor(td.select("observation"))
            return td.update(
                {"action": (out["action"] > 0).long(), "action_log_prob": out["action_log_prob"]}
            )

        data = env.rollout(3, policy)
        assert data["next", "kl_reward"].shape == (3, 1)

    def test_reference_follows_to_and_trainable_with_requires_grad(self):
        actor = _actor()
        frozen = KLRewardTransform(actor)
        assert list(frozen.parameters()) == []
        trainable = KLRewardTransform(actor, requires_grad=True)
        assert len(list(trainable.parameters())) == 2
        trainable.to(torch.float64)
        assert all(p.dtype == torch.float64 for p in trainable.parameters())

    def test_not_a_probabilistic_module_raises(self):
        with pytest.raises(TypeError, match=r"probabilistic tensordict module"):
            KLRewardTransform(torch.nn.Linear(1, 1))

    def test_several_reward_keys_raise(self):
        with pytest.raises(ValueError, match=r"single reward key"):
            KLRewardTransform(_actor(), in_keys=["a", "b"])

    def test_missing_action_raises(self):
        actor = _actor()
        td = TensorDict(
            observation=torch.zeros(2, 1),
            next=TensorDict(reward=torch.ones(2, 1), batch_size=[2]),
            batch_size=[2],
        )
        with pytest.raises(KeyError, match=r"expected the action at"):
            KLRewardTransform(actor)(td)

    def test_missing_next_raises(self):
        with pytest.raises(KeyError, match=r"'next' entry"):
            KLRewardTransform(_actor())(TensorDict(observation=torch.zeros(1)))
