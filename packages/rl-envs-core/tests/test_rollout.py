"""EnvBase.rollout and step_and_maybe_reset: TED layout, options, dynamic specs."""

from __future__ import annotations

from typing import Optional

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase

from rl_envs_core import EnvBase, check_env_specs, step_mdp
from rl_envs_core.testing import CountingEnv
from rl_specs import Binary, Bounded, Composite, Unbounded


class EnvWithDynamicSpec(EnvBase):
    """The seed's dynamic-spec example, verbatim apart from the imports."""

    def __init__(self, max_count=5):
        super().__init__(batch_size=())
        self.observation_spec = Composite(
            observation=Unbounded(shape=(3, -1, 2)),
        )
        self.action_spec = Bounded(low=-1, high=1, shape=(2,))
        self.full_done_spec = Composite(
            done=Binary(1, shape=(1,), dtype=torch.bool),
            terminated=Binary(1, shape=(1,), dtype=torch.bool),
            truncated=Binary(1, shape=(1,), dtype=torch.bool),
        )
        self.reward_spec = Unbounded((1,), dtype=torch.float)
        self.count = 0
        self.max_count = max_count

    def _reset(self, tensordict=None):
        self.count = 0
        data = TensorDict(
            {
                "observation": torch.full(
                    (3, self.count + 1, 2),
                    self.count,
                    dtype=self.observation_spec["observation"].dtype,
                )
            }
        )
        data.update(self.done_spec.zero())
        return data

    def _step(
        self,
        tensordict: TensorDictBase,
    ) -> TensorDictBase:
        self.count += 1
        done = self.count >= self.max_count
        observation = TensorDict(
            {
                "observation": torch.full(
                    (3, self.count + 1, 2),
                    self.count,
                    dtype=self.observation_spec["observation"].dtype,
                )
            }
        )
        done = self.full_done_spec.zero() | done
        reward = self.full_reward_spec.zero()
        return observation.update(done).update(reward)

    def _set_seed(self, seed: Optional[int]) -> None:  # noqa: UP045 - verbatim example
        self.manual_seed = seed
        return seed


class TestRollout:
    def test_trailing_time_dim(self):
        data = CountingEnv(max_steps=100, batch_size=[2, 3]).rollout(4)
        assert data.batch_size == torch.Size([2, 3, 4])
        assert data.names == [None, None, "time"]

    def test_ted_layout_root_is_t_next_is_t_plus_one(self):
        data = CountingEnv(max_steps=100).rollout(5)
        assert torch.equal(data["observation"][1:], data["next", "observation"][:-1])
        assert "reward" not in data.keys()
        assert set(data["next"].keys()) == {"observation", "reward", "done", "terminated"}

    def test_break_when_any_done_is_default(self):
        data = CountingEnv(max_steps=3).rollout(10)
        assert data.shape[-1] == 3
        assert data["next", "done"][-1].all()

    def test_no_break_resets_done_envs(self):
        data = CountingEnv(max_steps=2).rollout(5, break_when_any_done=False)
        assert data["observation"].squeeze(-1).tolist() == [0, 1, 0, 1, 0]
        assert data["next", "done"].squeeze(-1).tolist() == [False, True, False, True, False]

    def test_both_break_flags_raise(self):
        with pytest.raises(ValueError, match="exclusive"):
            CountingEnv().rollout(3, break_when_any_done=True, break_when_all_done=True)

    def test_policy_and_callback_are_used(self):
        seen = []
        policy = lambda td: td.set("action", torch.ones(1, dtype=torch.int64))  # noqa: E731
        data = CountingEnv(max_steps=10).rollout(
            4, policy, callback=lambda env, td: seen.append(td["next", "observation"].item())
        )
        assert data["action"].unique().tolist() == [1]
        assert seen == [1.0, 2.0, 3.0, 4.0]

    @pytest.mark.parametrize("break_when_any_done", [True, False])
    def test_policy_returning_a_new_tensordict_has_its_output_merged(self, break_when_any_done):
        def fresh_output(td):
            return td.empty().set("action", torch.ones((*td.shape, 1), dtype=torch.int64))

        data = CountingEnv(max_steps=3).rollout(
            5, fresh_output, break_when_any_done=break_when_any_done
        )
        assert {"observation", "done", "action"} <= set(data.keys())
        assert data["observation"][:3].squeeze(-1).tolist() == [0.0, 1.0, 2.0]

    def test_policy_writing_in_place_and_returning_none_is_used(self):
        def in_place(td):
            td.set("action", torch.ones((*td.shape, 1), dtype=torch.int64))

        data = CountingEnv(max_steps=10).rollout(3, in_place)
        assert data["action"].unique().tolist() == [1]
        assert data["next", "observation"].squeeze(-1).tolist() == [1.0, 2.0, 3.0]

    def test_policy_returning_something_else_than_a_tensordict_raises(self):
        with pytest.raises(TypeError, match="return a tensordict, got Tensor"):
            CountingEnv().rollout(2, lambda td: torch.ones(1))

    def test_return_contiguous_false_gives_lazy_stack(self):
        data = CountingEnv(max_steps=10).rollout(3, return_contiguous=False)
        assert isinstance(data, LazyStackedTensorDict)
        assert data.names[-1] == "time"

    def test_lazy_stack_of_batched_steps_names_time_only(self):
        data = CountingEnv(max_steps=10, batch_size=[2]).rollout(3, return_contiguous=False)
        assert data.names == [None, "time"]
        assert all(step.names == [None] for step in data.tensordicts)

    def test_auto_reset_false_needs_a_tensordict(self):
        with pytest.raises(ValueError, match="needs a tensordict to start from"):
            CountingEnv().rollout(3, auto_reset=False)

    def test_auto_reset_false_continues_from_tensordict(self):
        env = CountingEnv(max_steps=10)
        first = env.rollout(2)
        start = step_mdp(first[-1])
        second = env.rollout(2, auto_reset=False, tensordict=start)
        assert second["observation"].squeeze(-1).tolist() == [2.0, 3.0]

    def test_auto_reset_false_resets_done_entries_first(self):
        env = CountingEnv(max_steps=2, batch_size=[2])
        start = env.rollout(2)[:, -1]["next"].clone()
        start["done"][0] = False
        start["terminated"][0] = False
        env.count[0] = 1
        data = env.rollout(1, auto_reset=False, tensordict=start)
        assert data["observation"].squeeze(-1).tolist() == [[2.0], [0.0]]

    def test_set_truncated_marks_the_last_step(self):
        env = CountingEnv(max_steps=10, batch_size=[2]).add_truncated_keys()
        data = env.rollout(3, set_truncated=True)
        assert data["next", "truncated"][:, -1].all() and data["next", "done"][:, -1].all()
        assert not data["next", "truncated"][:, :-1].any()

    def test_set_truncated_without_truncated_key_raises(self):
        env = CountingEnv()  # declares done and terminated only
        with pytest.raises(RuntimeError, match="needs a 'truncated' entry"):
            env.rollout(3, set_truncated=True)

    def test_out_receives_the_result(self):
        env = CountingEnv(max_steps=10)
        out = TensorDict()
        assert env.rollout(3, out=out) is out
        assert out["next", "observation"].squeeze(-1).tolist() == [1.0, 2.0, 3.0]

    def test_max_steps_must_be_positive(self):
        with pytest.raises(ValueError, match="max_steps >= 1"):
            CountingEnv().rollout(0)

    def test_auto_cast_to_device_with_module_policy(self):
        class Policy(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.weight = torch.nn.Parameter(torch.zeros(1))

            def forward(self, td):
                return td.set("action", torch.zeros(1, dtype=torch.int64))

        data = CountingEnv(device="cpu").rollout(2, Policy(), auto_cast_to_device=True)
        assert data.device == torch.device("cpu")

    def test_tensordict_with_auto_reset_is_passed_to_reset(self):
        env = CountingEnv(max_steps=10, batch_size=[2])
        start = TensorDict({"_reset": torch.tensor([[True], [False]]),
                            "observation": torch.full((2, 1), 4.0)}, [2])
        env.count = torch.tensor([[4.0], [4.0]])
        data = env.rollout(1, tensordict=start)
        assert data["observation"].squeeze(-1).tolist() == [[0.0], [4.0]]

    def test_varying_keys_need_return_contiguous_false(self):
        class Flaky(CountingEnv):
            def __init__(self):
                super().__init__(max_steps=10)
                self.observation_spec = Composite(
                    observation=Unbounded(shape=(1,)), bonus=Unbounded(shape=(1,))
                )

            def _step(self, tensordict):
                out = super()._step(tensordict)
                return out.set("bonus", torch.zeros(1)) if self.count.item() == 1 else out

        with pytest.raises(RuntimeError, match=r"Keys or shapes vary.*return_contiguous=False"):
            Flaky().rollout(3)
        assert Flaky().rollout(3, return_contiguous=False).batch_size == torch.Size([3])

    def test_dynamic_spec_example_runs(self):
        env = EnvWithDynamicSpec()
        data = env.rollout(5, return_contiguous=False)
        assert isinstance(data, LazyStackedTensorDict)
        assert data.batch_size == torch.Size([5])
        assert sorted(data.keys()) == ["action", "done", "next", "observation", "terminated",
                                       "truncated"]  # the example declares truncated
        assert [td["next", "observation"].shape[1] for td in data.tensordicts] == [2, 3, 4, 5, 6]

    def test_check_env_specs_passes_with_dynamic_specs(self):
        check_env_specs(EnvWithDynamicSpec())

    def test_default_picks_a_lazy_stack_for_dynamic_specs(self):
        assert isinstance(EnvWithDynamicSpec().rollout(3), LazyStackedTensorDict)
        data = CountingEnv(max_steps=10).rollout(3)
        assert not isinstance(data, LazyStackedTensorDict)  # static specs: contiguous

    def test_contiguous_rollout_of_dynamic_specs_raises(self):
        with pytest.raises(RuntimeError, match=r"specs are dynamic.*return_contiguous=False"):
            EnvWithDynamicSpec().rollout(3, return_contiguous=True)


class TestStepAndMaybeReset:
    def test_documented_loop(self):
        env = CountingEnv(max_steps=3, batch_size=[2])
        data_ = env.reset()
        result = []
        for _ in range(7):
            data, data_ = env.step_and_maybe_reset(env.rand_action(data_))
            result.append(data)
        result = torch.stack(result, -1)
        assert result["observation"].squeeze(-1)[0].tolist() == [0, 1, 2, 0, 1, 2, 0]
        assert not result["done"].any()

    def test_partial_done_resets_only_done_elements(self):
        env = CountingEnv(max_steps=2, batch_size=[2])
        env.reset()
        env.count = torch.tensor([[1.0], [0.0]])
        data_ = env.rand_action(TensorDict({"observation": env.count.float()}, [2]))
        data_.update(env.full_done_spec.zero())
        data, data_ = env.step_and_maybe_reset(data_)
        assert data["next", "done"].squeeze(-1).tolist() == [True, False]
        assert data_["observation"].squeeze(-1).tolist() == [0.0, 1.0]
        assert not data_["done"].any()
        assert "_reset" not in data_.keys()

    def test_extra_root_entries_are_carried(self):
        env = CountingEnv(max_steps=1)
        data_ = env.rand_action(env.reset()).set("hidden", torch.ones(3))
        _, data_ = env.step_and_maybe_reset(data_)
        assert torch.equal(data_["hidden"], torch.ones(3))
        assert "action" not in data_.keys()
