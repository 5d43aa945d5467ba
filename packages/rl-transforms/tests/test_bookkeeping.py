"""StepCounter, RewardSum, InitTracker."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs_core import check_env_specs, step_mdp
from rl_transforms import (
    Compose,
    InitTracker,
    RewardSum,
    StepCounter,
    TargetReturn,
    Timer,
    TransformedEnv,
)


class TestStepCounter:
    def test_truncation_restarts_an_unbatched_stateless_env(self):
        from rl_envs_core import PendulumEnv

        env = TransformedEnv(PendulumEnv(), StepCounter(max_steps=5))
        data = env.rollout(12, break_when_any_done=False)
        assert data["next", "step_count"].squeeze(-1).tolist() == [1, 2, 3, 4, 5] * 2 + [1, 2]

    def test_counts_from_reset(self, counting_env):
        env = TransformedEnv(counting_env(max_steps=3), StepCounter())
        data = env.rollout(10, break_when_any_done=False)
        assert data["step_count"].squeeze(-1).tolist() == [0, 1, 2, 0, 1, 2, 0, 1, 2, 0]
        assert data["next", "step_count"].squeeze(-1).tolist() == [1, 2, 3, 1, 2, 3, 1, 2, 3, 1]

    def test_max_steps_sets_truncated_and_done(self, counting_env):
        env = TransformedEnv(counting_env(max_steps=100), StepCounter(max_steps=2))
        data = env.rollout(10)
        assert data["next", "truncated"].squeeze(-1).tolist() == [False, True]
        assert data["next", "done"].squeeze(-1).tolist() == [False, True]
        assert not data["next", "terminated"].any()

    def test_update_done_false_leaves_done(self, counting_env):
        env = TransformedEnv(
            counting_env(max_steps=100), StepCounter(max_steps=2, update_done=False)
        )
        data = env.rollout(3, break_when_any_done=False)
        assert data["next", "truncated"].squeeze(-1).tolist() == [False, True, True]
        assert not data["next", "done"].any()
        assert env.observation_spec["step_count"].is_in(data["next", "step_count"])

    def test_custom_keys_and_spec(self, counting_env):
        t = StepCounter(max_steps=4, step_count_key="n", truncated_key="cut")
        env = TransformedEnv(counting_env(batch_size=[2]), t)
        assert env.observation_spec["n"].dtype == torch.int64
        assert "cut" in env.full_done_spec.keys()
        assert t.out_keys == ["n", "cut"]
        check_env_specs(env)

    def test_partial_reset_resets_masked_counters_only(self, counting_env):
        env = TransformedEnv(counting_env(max_steps=10, batch_size=[2]), StepCounter())
        td = env.reset()
        td = step_mdp(env.rand_step(td))
        td.set("_reset", torch.tensor([[False], [True]]))
        assert env.reset(td)["step_count"].squeeze(-1).tolist() == [1, 0]

    @pytest.mark.parametrize("max_steps", [0, -3, 1.5])
    def test_bad_max_steps_raises(self, max_steps):
        with pytest.raises(
            ValueError, match=r"StepCounter expected max_steps to be a positive int"
        ):
            StepCounter(max_steps=max_steps)

    def test_step_without_count_starts_from_zero(self):
        out = StepCounter()._step(
            TensorDict(), TensorDict({"done": torch.zeros(1, dtype=torch.bool)})
        )
        assert out["step_count"].tolist() == [1]

    def test_forward_on_stored_data_raises(self):
        with pytest.raises(RuntimeError, match=r"StepCounter counts steps of an environment"):
            StepCounter()(TensorDict())

    def test_counts_per_done_level(self, marl_env):
        env = TransformedEnv(marl_env(), StepCounter(max_steps=2))
        data = env.rollout(5)
        assert data["next", "agents", "step_count"].squeeze(-1).tolist() == [[1, 1], [2, 2]]
        assert data["next", "step_count"].squeeze(-1).tolist() == [1, 2]
        assert data["next", "agents", "truncated"][-1].all()
        check_env_specs(env)

    def test_count_declared_as_state_for_batched_envs(self, counting_env):
        env = TransformedEnv(counting_env(), StepCounter())
        assert "step_count" in env.full_state_spec.keys()

    def test_check_env_specs(self, counting_env):
        check_env_specs(TransformedEnv(counting_env(), StepCounter(max_steps=2)))

    @pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float32])
    def test_step_adds_one_keeping_the_count_dtype(self, dtype):
        count = torch.tensor([[3], [7]], dtype=dtype)
        out = StepCounter()._step(
            TensorDict({"step_count": count}, [2]),
            TensorDict({"done": torch.zeros(2, 1, dtype=torch.bool)}, [2]),
        )
        assert out["step_count"].dtype == (count + 1).dtype
        assert torch.equal(out["step_count"], count + 1)


class TestRewardSum:
    def test_sums_rewards_and_resets(self, counting_env):
        env = TransformedEnv(counting_env(max_steps=2), RewardSum())
        data = env.rollout(5, break_when_any_done=False)
        assert data["next", "episode_reward"].squeeze(-1).tolist() == [1.0, 2.0, 1.0, 2.0, 1.0]
        assert data["episode_reward"].squeeze(-1).tolist() == [0.0, 1.0, 0.0, 1.0, 0.0]

    def test_default_keys_follow_reward_spec(self, counting_env):
        t = RewardSum()
        TransformedEnv(counting_env(), t)
        assert t.in_keys == ["reward"] and t.out_keys == ["episode_reward"]
        assert t.reset_keys == ["_reset"]

    def test_nested_reward_gets_nested_sum(self):
        t = RewardSum(in_keys=[("agents", "reward")])
        assert t.out_keys == [("agents", "episode_reward")]
        assert t.reset_keys == [("agents", "_reset")]

    def test_marl_nested_rewards(self, marl_env):
        t = RewardSum()
        env = TransformedEnv(marl_env(), t)
        assert t.in_keys == [("agents", "reward")] and t.out_keys == [("agents", "episode_reward")]
        assert t.reset_keys == [("agents", "_reset")]
        data = env.rollout(3)
        assert data["next", "agents", "episode_reward"].squeeze(-1).tolist() == [
            [1.0, 2.0],
            [2.0, 4.0],
            [3.0, 6.0],
        ]
        check_env_specs(env)

    def test_explicit_reset_keys(self):
        t = RewardSum(in_keys=["r"], reset_keys=["my_reset"])
        reset = t._reset(
            TensorDict(
                {
                    "episode_r": torch.tensor([[4.0], [5.0]]),
                    "my_reset": torch.tensor([True, False]),
                },
                [2],
            ),
            TensorDict({}, [2]),
        )
        assert reset["episode_r"].squeeze(-1).tolist() == [0.0, 5.0]

    def test_reward_spec_flag_places_sum_in_reward_spec(self, counting_env):
        env = TransformedEnv(counting_env(), RewardSum(reward_spec=True))
        assert "episode_reward" in env.full_reward_spec.keys()
        assert "episode_reward" not in env.observation_spec.keys()
        data = env.rollout(3)
        assert data["next", "episode_reward"].squeeze(-1).tolist() == [1.0, 2.0, 3.0]
        assert data["episode_reward"].squeeze(-1).tolist() == [0.0, 1.0, 2.0]

    def test_default_sum_name_follows_each_reward_name(self):
        t = RewardSum(in_keys=["reward", ("team", "gift")])
        assert t.out_keys == ["episode_reward", ("team", "episode_gift")]

    def test_unequal_key_lists_raise(self):
        with pytest.raises(ValueError, match="same number of input and output keys"):
            RewardSum(in_keys=["a", "b"], out_keys=["sum"])

    def test_one_reset_key_per_reward_is_checked_at_reset(self):
        t = RewardSum(in_keys=["a", "b"], out_keys=["sa", "sb"], reset_keys=["_reset"])
        with pytest.raises(ValueError, match="Could not match the env reset_keys"):
            t._reset(TensorDict({}, [2]), TensorDict({}, [2]))

    def test_offline_sum_restarts_after_done_along_time(self):
        data = TensorDict(
            {"next": {"reward": torch.ones(2, 4, 1),
                      "done": torch.tensor([[0, 1, 0, 0], [0, 0, 0, 1]]).bool().unsqueeze(-1)}},
            [2, 4],
            names=[None, "time"],
        )
        t = RewardSum(in_keys=[("next", "reward")], out_keys=[("next", "ret")])
        assert t(data)["next", "ret"].squeeze(-1).tolist() == [[1, 2, 1, 2], [1, 2, 3, 4]]

    def test_offline_sum_needs_a_batch_dim(self):
        t = RewardSum(in_keys=[("next", "reward")])
        with pytest.raises(ValueError, match="At least one dimension"):
            t(TensorDict({("next", "reward"): torch.ones(1)}, []))

    def test_offline_sum_of_a_missing_reward_raises(self):
        data = TensorDict({("next", "reward"): torch.ones(3, 1)}, [3], names=["time"])
        with pytest.raises(KeyError, match="Stored transitions keep rewards under"):
            RewardSum()(data)

    def test_partial_reset_keeps_other_sums(self, counting_env):
        env = TransformedEnv(counting_env(max_steps=10, batch_size=[2]), RewardSum())
        td = step_mdp(env.rand_step(env.reset()))
        td.set("_reset", torch.tensor([[True], [False]]))
        assert env.reset(td)["episode_reward"].squeeze(-1).tolist() == [0.0, 1.0]

    def test_missing_reward_key_raises(self, counting_env):
        with pytest.raises(KeyError, match=r"RewardSum expected the reward 'bonus'"):
            TransformedEnv(counting_env(), RewardSum(in_keys=["bonus"]))


    def test_sum_declared_as_state_for_batched_envs(self, counting_env):
        env = TransformedEnv(counting_env(), RewardSum())
        assert "episode_reward" in env.full_state_spec.keys()

    def test_check_env_specs(self, counting_env):
        check_env_specs(TransformedEnv(counting_env(batch_size=[3]), RewardSum()))


class TestInitTracker:
    def test_true_after_reset_only(self, counting_env):
        env = TransformedEnv(counting_env(max_steps=2), InitTracker())
        data = env.rollout(4, break_when_any_done=False)
        assert data["is_init"].squeeze(-1).tolist() == [True, False, True, False]
        assert not data["next", "is_init"].any()

    def test_custom_key(self, counting_env):
        t = InitTracker(init_key="first")
        env = TransformedEnv(counting_env(batch_size=[2]), t)
        assert env.reset()["first"].shape == torch.Size([2, 1])
        assert t.out_keys == ["first"]

    def test_nested_init_key_raises(self):
        with pytest.raises(ValueError, match="init_key can only be of type str"):
            InitTracker(init_key=("a", "b"))

    def test_forward_on_stored_data_raises(self):
        with pytest.raises(NotImplementedError, match=r"InitTracker cannot be executed without a parent"):
            InitTracker()(TensorDict())

    def test_check_env_specs(self, counting_env):
        check_env_specs(TransformedEnv(counting_env(), Compose(InitTracker(), StepCounter())))


class TestTargetReturn:
    @pytest.mark.parametrize(
        "mode, expected", [("reduce", [9.0, 8.0, 7.0]), ("constant", [10.0, 10.0, 10.0])]
    )
    def test_modes(self, counting_env, mode, expected):
        env = TransformedEnv(counting_env(max_steps=5), TargetReturn(10.0, mode=mode))
        data = env.rollout(3)
        assert data["next", "target_return"].squeeze(-1).tolist() == expected
        assert data["target_return"][0].item() == 10.0

    def test_reset_restores_target(self, counting_env):
        env = TransformedEnv(counting_env(max_steps=2), TargetReturn(5.0))
        data = env.rollout(4, break_when_any_done=False)
        assert data["target_return"].squeeze(-1).tolist() == [5.0, 4.0, 5.0, 4.0]

    def test_nested_rewards(self, marl_env):
        t = TargetReturn(3.0)
        env = TransformedEnv(marl_env(), t)
        assert t.out_keys == [("agents", "target_return")]
        assert env.rollout(1)["next", "agents", "target_return"].squeeze(-1).tolist() == [
            [2.0, 1.0]
        ]

    def test_bad_mode_raises(self):
        with pytest.raises(ValueError, match=r"TargetReturn expected mode in"):
            TargetReturn(1.0, mode="grow")

    def test_step_without_reset_raises(self):
        with pytest.raises(
            KeyError, match=r"TargetReturn expected 'target_return' in the step input"
        ):
            TargetReturn(1.0)._step(TensorDict(), TensorDict({"reward": torch.ones(1)}))

    def test_check_env_specs(self, counting_env):
        check_env_specs(TransformedEnv(counting_env(batch_size=[2]), TargetReturn(4.0)))


class TestTimer:
    def test_records_non_negative_intervals(self, counting_env):
        env = TransformedEnv(counting_env(), Timer())
        data = env.rollout(3)
        assert (data["next", "time_policy"] >= 0).all() and (data["next", "time_step"] >= 0).all()
        assert data["time_step"][0].item() == 0.0

    def test_custom_keys(self, counting_env):
        env = TransformedEnv(counting_env(), Timer(out_keys=["tp", "ts"]))
        assert {"tp", "ts"} <= set(env.observation_spec.keys())

    def test_wrong_number_of_keys_raises(self):
        with pytest.raises(ValueError, match=r"Timer expected two out_keys"):
            Timer(out_keys=["a"])

    def test_check_env_specs(self, counting_env):
        check_env_specs(TransformedEnv(counting_env(batch_size=[2]), Timer()))
