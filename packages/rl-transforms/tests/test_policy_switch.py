"""ConditionalPolicySwitch: another policy plays while a condition holds."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs_core.testing import CountingEnv
from rl_transforms import ConditionalPolicySwitch, StepCounter, TransformedEnv


def opponent(td):
    return td.set("action", torch.ones(*td.batch_size, 1, dtype=torch.int64))


def odd(td):
    return td["observation"].remainder(2).eq(1).squeeze(-1)


class TestConditionalPolicySwitch:
    def test_the_outer_policy_sees_only_its_turns(self):
        env = TransformedEnv(CountingEnv(max_steps=20), StepCounter()).append_transform(
            ConditionalPolicySwitch(opponent, odd)
        )
        data = env.rollout(4)
        assert data["observation"].squeeze(-1).tolist() == [0, 2, 4, 6]
        # the opponent's steps are real steps of the parent env
        assert data["next", "step_count"].squeeze(-1).tolist() == [2, 4, 6, 8]

    def test_reset_state_that_meets_the_condition_is_played(self):
        env = TransformedEnv(
            CountingEnv(max_steps=20),
            ConditionalPolicySwitch(opponent, lambda td: bool(td["observation"] == 0)),
        )
        reset = env.reset()
        assert reset["observation"].item() == 1.0 and "reward" not in reset.keys()

    def test_no_switch_when_the_episode_ended(self):
        env = TransformedEnv(CountingEnv(max_steps=3), ConditionalPolicySwitch(opponent, odd))
        data = env.rollout(10)
        assert data["next", "observation"].squeeze(-1).tolist() == [2, 3]
        assert data["next", "done"][-1].item()

    def test_batched_env_switches_only_where_the_condition_holds(self):
        env = TransformedEnv(CountingEnv(max_steps=20, batch_size=[2]), StepCounter())
        env = env.append_transform(
            ConditionalPolicySwitch(opponent, lambda td: td["step_count"].squeeze(-1).eq(1))
        )
        td = env.reset()
        td["action"] = torch.ones(2, 1, dtype=torch.int64)
        out = env.step(td)["next"]
        assert out["step_count"].squeeze(-1).tolist() == [2, 2]

    @pytest.mark.parametrize(
        ("result", "error"),
        [("yes", TypeError), (torch.ones(3, dtype=torch.bool), ValueError)],
    )
    def test_bad_condition_output(self, result, error):
        env = TransformedEnv(
            CountingEnv(batch_size=[2]), ConditionalPolicySwitch(opponent, lambda td: result)
        )
        with pytest.raises(error, match="condition"):
            env.reset()

    def test_arguments_must_be_callable(self):
        with pytest.raises(TypeError, match="policy"):
            ConditionalPolicySwitch(None, odd)

    def test_stored_data_is_refused(self):
        with pytest.raises(RuntimeError, match="TransformedEnv"):
            ConditionalPolicySwitch(opponent, odd)(TensorDict())
