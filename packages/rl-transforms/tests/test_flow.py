"""FrameSkipTransform, NoopResetEnv, EndOfLifeTransform."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs_core import check_env_specs
from rl_transforms import (
    Compose,
    ConditionalSkip,
    EndOfLifeTransform,
    FrameSkipTransform,
    NoopResetEnv,
    StepCounter,
    TransformedEnv,
)


class TestFrameSkipTransform:
    def test_repeats_and_sums_rewards(self, counting_env):
        env = TransformedEnv(counting_env(max_steps=10), FrameSkipTransform(3))
        data = env.rollout(2)
        assert data["next", "observation"].squeeze(-1).tolist() == [3.0, 6.0]
        assert data["next", "reward"].squeeze(-1).tolist() == [3.0, 3.0]

    def test_stops_at_done(self, counting_env):
        env = TransformedEnv(counting_env(max_steps=4), FrameSkipTransform(3))
        data = env.rollout(5)
        assert data["next", "observation"].squeeze(-1).tolist() == [3.0, 4.0]
        assert data["next", "reward"].squeeze(-1).tolist() == [3.0, 1.0]

    def test_after_other_transforms(self, counting_env):
        env = TransformedEnv(
            counting_env(max_steps=10), Compose(StepCounter(), FrameSkipTransform(2))
        )
        assert env.rollout(2)["next", "observation"].squeeze(-1).tolist() == [2.0, 4.0]

    def test_bad_frame_skip_raises(self):
        with pytest.raises(ValueError, match=r"FrameSkipTransform expected frame_skip >= 1"):
            FrameSkipTransform(0)

    def test_without_env_raises(self):
        with pytest.raises(RuntimeError, match=r"FrameSkipTransform drives its parent environment"):
            FrameSkipTransform(2)._step(TensorDict(), TensorDict())

    def test_check_env_specs(self, counting_env):
        check_env_specs(TransformedEnv(counting_env(batch_size=[2]), FrameSkipTransform(2)))


class TestNoopResetEnv:
    def test_fixed_number_of_noops(self, counting_env):
        env = TransformedEnv(counting_env(max_steps=100), NoopResetEnv(noops=4, random=False))
        td = env.reset()
        assert td["observation"].item() == 4.0 and "action" not in td.keys()

    def test_random_number_of_noops(self, counting_env):
        env = TransformedEnv(counting_env(max_steps=100), NoopResetEnv(noops=5))
        values = {env.reset()["observation"].item() for _ in range(20)}
        assert values <= {1.0, 2.0, 3.0, 4.0, 5.0} and len(values) > 1

    def test_retries_when_done(self, counting_env):
        env = TransformedEnv(counting_env(max_steps=2), NoopResetEnv(noops=2, random=False))
        with pytest.raises(
            RuntimeError, match=r"NoopResetEnv: the env ended during the random steps"
        ):
            env.reset()

    def test_negative_noops_raise(self):
        with pytest.raises(ValueError, match=r"NoopResetEnv expected noops >= 0"):
            NoopResetEnv(-1)

    def test_batched_parent_raises_at_reset(self, counting_env):
        env = TransformedEnv(counting_env(batch_size=[2]), NoopResetEnv(noops=2))
        with pytest.raises(ValueError, match="batch-size is non-null"):
            env.reset()

    def test_check_env_specs(self, counting_env):
        check_env_specs(TransformedEnv(counting_env(max_steps=100), NoopResetEnv(3)))


class TestEndOfLifeTransform:
    def test_flags_lost_lives(self, self_resetting_env):
        env = TransformedEnv(self_resetting_env(max_steps=10, lives=True), EndOfLifeTransform())
        data = env.rollout(4)
        assert data["next", "end-of-life"].squeeze(-1).tolist() == [False, True, False, True]
        assert not data["end-of-life"][0].any()

    def test_lives_from_env_attribute(self, counting_env):
        class Lives:
            def __init__(self):
                self.n = 3

            def lives(self):
                self.n -= 1
                return self.n

        base = counting_env(max_steps=10)
        base.game = Lives()
        env = TransformedEnv(base, EndOfLifeTransform(eol_attribute="game.lives"))
        data = env.rollout(2)
        assert data["next", "end-of-life"].squeeze(-1).tolist() == [True, True]

    def test_missing_lives_raise(self, counting_env):
        env = TransformedEnv(counting_env(), EndOfLifeTransform())
        with pytest.raises(AttributeError, match=r"EndOfLifeTransform found no 'lives' entry"):
            env.reset()

    def test_check_env_specs(self, self_resetting_env):
        check_env_specs(
            TransformedEnv(self_resetting_env(max_steps=10, lives=True), EndOfLifeTransform())
        )


class TestConditionalSkip:
    def test_a_fully_skipped_step_runs_no_transform_of_its_env(self, counting_env):
        inner = TransformedEnv(
            counting_env(max_steps=100),
            Compose(
                StepCounter(step_count_key="inner_count"),
                ConditionalSkip(lambda td: td["step_count"] % 2 == 1),
            ),
        )
        env = TransformedEnv(inner, StepCounter(), auto_unwrap=False)
        data = env.rollout(6, lambda td: td.set("action", torch.ones(1)))
        assert data["step_count"].flatten().tolist() == [0, 1, 2, 3, 4, 5]
        assert data["inner_count"].flatten().tolist() == [0, 1, 1, 2, 2, 3]
        skipped = data[1]
        assert torch.equal(skipped["next", "observation"], skipped["observation"])
        assert skipped["next", "reward"].item() == 0.0
        check_env_specs(env)

    def test_called_on_data_raises(self):
        with pytest.raises(NotImplementedError, match="only acts inside an env"):
            ConditionalSkip(lambda td: True)(TensorDict())

    def test_skips_where_condition_holds(self, counting_env):
        base = counting_env(max_steps=10, batch_size=[2])
        env = TransformedEnv(
            base, ConditionalSkip(lambda td: td["observation"] >= torch.tensor([[1.0], [3.0]]))
        )
        data = env.rollout(4)
        assert data["next", "observation"].squeeze(-1).tolist() == [
            [1.0, 1.0, 1.0, 1.0],
            [1.0, 2.0, 3.0, 3.0],
        ]

    def test_combines_with_existing_step_mask(self):
        t = ConditionalSkip(lambda td: torch.tensor([False, True]))
        out = t.inv(TensorDict({"_step": torch.tensor([False, True])}, [2]))
        assert out["_step"].tolist() == [False, False]

    def test_non_callable_raises(self):
        with pytest.raises(TypeError, match=r"ConditionalSkip expected a callable cond"):
            ConditionalSkip(True)

    def test_check_env_specs(self, counting_env):
        check_env_specs(
            TransformedEnv(
                counting_env(max_steps=10), ConditionalSkip(lambda td: td["observation"] > 5)
            )
        )
