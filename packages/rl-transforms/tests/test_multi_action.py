"""MultiAction: several actions per env step."""

from __future__ import annotations

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict

from rl_envs_core.testing import CountingEnv
from rl_transforms import Compose, MultiAction, RewardScaling, StepCounter, TransformedEnv


def _actions(*shape):
    return torch.zeros(*shape, dtype=torch.int64)


class TestMultiAction:
    def test_plays_every_action_and_stacks_rewards(self):
        env = TransformedEnv(CountingEnv(max_steps=10), MultiAction())
        out = env.step(env.reset().set("action", _actions(4, 1)))
        assert out["next", "observation"].item() == 4.0
        assert out["next", "reward"].shape == (4, 1)
        assert out["next", "reward"].sum().item() == 4.0

    def test_last_reward_only_when_not_stacking(self):
        env = TransformedEnv(CountingEnv(max_steps=10), MultiAction(stack_rewards=False))
        out = env.step(env.reset().set("action", _actions(3, 1)))
        assert out["next", "reward"].shape == (1,)
        assert env.reward_spec.shape == (1,)

    def test_stacked_observations(self):
        env = TransformedEnv(CountingEnv(max_steps=10), MultiAction(stack_observations=True))
        out = env.step(env.reset().set("action", _actions(3, 1)))
        assert out["next", "observation"].squeeze(-1).tolist() == [1.0, 2.0, 3.0]

    def test_stops_on_done_and_zero_fills_the_rest(self):
        env = TransformedEnv(CountingEnv(max_steps=2), MultiAction())
        out = env.step(env.reset().set("action", _actions(5, 1)))
        assert out["next", "done"].item()
        assert out["next", "observation"].item() == 2.0  # the env was not stepped past done
        assert out["next", "reward"].squeeze(-1).tolist() == [1.0, 1.0, 0.0, 0.0, 0.0]

    def test_batched_env_stops_only_the_done_elements(self):
        base = CountingEnv(max_steps=3, batch_size=[2])
        env = TransformedEnv(base, MultiAction())
        td = env.reset()
        base.count[1] = 2  # element 1 is one step from done
        td["observation"][1] = 2.0
        out = env.step(td.set("action", _actions(2, 3, 1)))
        assert out["next", "done"].squeeze(-1).tolist() == [True, True]
        assert out["next", "reward"][1].squeeze(-1).tolist() == [1.0, 0.0, 0.0]
        assert out["next", "reward"][0].squeeze(-1).tolist() == [1.0, 1.0, 1.0]

    def test_rollout_counts_macro_steps(self):
        env = TransformedEnv(
            CountingEnv(max_steps=100, batch_size=[2]), Compose(MultiAction(), StepCounter())
        )
        data = env.rollout(3, lambda td: td.set("action", _actions(2, 4, 1)))
        assert data.shape == (2, 3)
        assert data["next", "observation"][0].squeeze(-1).tolist() == [4.0, 8.0, 12.0]
        assert data["next", "step_count"][0].squeeze(-1).tolist() == [1, 2, 3]

    def test_transforms_before_run_once_per_action(self):
        env = TransformedEnv(
            CountingEnv(max_steps=100), Compose(RewardScaling(loc=0.0, scale=2.0), MultiAction())
        )
        out = env.step(env.reset().set("action", _actions(3, 1)))
        assert out["next", "reward"].squeeze(-1).tolist() == [2.0, 2.0, 2.0]

    def test_action_spec_has_a_dynamic_stack_dim(self):
        env = TransformedEnv(CountingEnv(batch_size=[2]), MultiAction())
        assert tuple(env.action_spec.shape) == (2, -1, 1)
        assert tuple(env.reward_spec.shape) == (2, -1, 1)

    def test_dim_two_stacks_after_the_first_action_dim(self):
        env = TransformedEnv(CountingEnv(max_steps=10), MultiAction(dim=2))
        out = env.step(env.reset().set("action", _actions(1, 3)))
        assert out["next", "observation"].item() == 3.0
        assert out["next", "reward"].shape == (1, 3)

    def test_mis_shaped_stack_names_key_expected_and_found(self):
        env = TransformedEnv(CountingEnv(max_steps=10), MultiAction())
        td = env.reset().set("action", _actions(3))
        with pytest.raises(ValueError, match=r"'action'.*\(n, 1\).*found \(3,\)"):
            env.transform._inv_call(td)

    def test_missing_action_raises_key_error(self):
        env = TransformedEnv(CountingEnv(max_steps=10), MultiAction())
        with pytest.raises(KeyError, match=r"stack of actions at 'action'"):
            env.transform._inv_call(env.reset())

    def test_empty_stack_raises(self):
        env = TransformedEnv(CountingEnv(max_steps=10), MultiAction())
        with pytest.raises(ValueError, match=r"at least one action"):
            env.transform._inv_call(env.reset().set("action", _actions(0, 1)))

    @pytest.mark.parametrize("dim", [0, -1, 1.5])
    def test_bad_dim_raises(self, dim):
        with pytest.raises(ValueError, match=r"MultiAction expected dim >= 1"):
            MultiAction(dim=dim)

    def test_on_stored_data_raises(self):
        with pytest.raises(RuntimeError, match=r"cannot be applied to stored data"):
            MultiAction()(TensorDict())


class TestMultiActionInputs:
    """Plain tensordicts take a fast sub-step path; any other input the generic one."""

    @staticmethod
    def _step(td):
        base = CountingEnv(max_steps=3, batch_size=[2])
        env = TransformedEnv(base, MultiAction(stack_observations=True))
        base.count[1] = 2  # element 1 is one step from done
        return env.step(td)

    def _input(self):
        env = TransformedEnv(CountingEnv(max_steps=3, batch_size=[2]), MultiAction())
        td = env.reset().set("action", _actions(2, 3, 1))
        td["observation"][1] = 2.0
        return td

    def test_lazy_stacked_input_gives_the_same_step_as_a_plain_one(self):
        plain = self._step(self._input())
        lazy = self._step(LazyStackedTensorDict.lazy_stack(self._input().unbind(0), 0))
        assert type(lazy) is not TensorDict
        for key in plain.keys(True, True):
            assert torch.equal(plain[key], lazy[key]), key

    def test_the_callers_input_keeps_its_stack_and_gets_no_step_mask(self):
        td = self._input()
        before = dict(td.items())
        out = self._step(td)
        assert out is td and "_step" not in td.keys()
        assert td["action"].shape == (2, 3, 1)
        assert all(td.get(key) is value for key, value in before.items() if key != "observation")
        assert out["next", "reward"][1].squeeze(-1).tolist() == [1.0, 0.0, 0.0]


def test_check_env_specs_draws_the_dynamic_action_stack_at_one_action():
    from rl_envs_core import check_env_specs

    env = TransformedEnv(CountingEnv(max_steps=10), MultiAction())
    assert env.action_spec.shape == (-1, 1)  # the number of actions per step varies
    assert env.rand_action(env.reset())["action"].shape == (1, 1)
    check_env_specs(env)


def test_the_root_keeps_the_state_before_the_played_actions():
    # a counter placed before MultiAction counts sub-steps; each recorded root is the
    # state before its macro-step, each next the state after its last action
    env = TransformedEnv(
        CountingEnv(max_steps=100),
        Compose(StepCounter(step_count_key="inner"), MultiAction(), StepCounter()),
    )
    data = env.rollout(4, lambda td: td.set("action", torch.ones(3, 1, dtype=torch.int64)))
    assert data["inner"].flatten().tolist() == [0, 3, 6, 9]
    assert data["next", "inner"].flatten().tolist() == [3, 6, 9, 12]
    assert data["step_count"].flatten().tolist() == [0, 1, 2, 3]
    assert data["observation"].flatten().tolist() == [0, 3, 6, 9]


def test_a_batch_unlocked_env_plays_stacks_with_leading_batch_dims():
    from rl_envs_core import PendulumEnv

    env = TransformedEnv(PendulumEnv(), MultiAction())
    start = env.reset(env.gen_params(batch_size=[4]))
    data = env.rollout(
        5,
        lambda td: td.set("action", torch.ones(*td.shape, 3, 1)),
        tensordict=start,
        auto_reset=False,
    )
    assert data.batch_size == (4, 5) and data["next", "reward"].shape == (4, 5, 3, 1)
    with pytest.raises(ValueError, match=r"should have shape \(4, -1, 1\), got \(4, 3, 2\)"):
        env.step(start.clone().set("action", torch.ones(4, 3, 2)))  # a 2-wide action
