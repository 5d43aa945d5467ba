"""ActionMask, ActionDiscretizer, DiscreteActionProjection."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs_core import EnvBase, check_env_specs
from rl_specs import (
    Bounded,
    Categorical,
    Composite,
    MultiCategorical,
    MultiOneHot,
    OneHot,
    Unbounded,
)
from rl_transforms import ActionDiscretizer, ActionMask, DiscreteActionProjection, TransformedEnv


class TestActionMask:
    def test_random_actions_follow_the_mask(self, masked_env):
        env = TransformedEnv(masked_env(), ActionMask())
        data = env.rollout(8)
        assert data["action"].long().argmax(-1).tolist() == [0, 1, 2, 3, 0, 1, 2, 3]

    def test_batched_mask(self, masked_env):
        env = TransformedEnv(masked_env(batch_size=[3], cycle=False), ActionMask())
        actions = env.rollout(5)["action"].long().argmax(-1)
        assert ((actions == 1) | (actions == 2)).all()

    def test_non_discrete_action_raises(self, continuous_env):
        env = TransformedEnv(continuous_env(), ActionMask())  # checked when data flows
        with pytest.raises(ValueError, match=r"The action spec must be one of .* got Bounded"):
            env.rollout(2)

    def test_missing_mask_raises(self):
        with pytest.raises(KeyError, match=r"ActionMask expected the entry 'action_mask'"):
            ActionMask()(TensorDict())

    def test_check_env_specs(self, masked_env):
        check_env_specs(TransformedEnv(masked_env(cycle=False), ActionMask()))


class TestActionDiscretizer:
    @pytest.mark.parametrize(
        "categorical, batch, spec_type, shape",
        [
            (True, [], MultiCategorical, (2,)),
            (True, [3], MultiCategorical, (3, 2)),
            (False, [], MultiOneHot, (10,)),
        ],
    )
    def test_exposed_spec(self, continuous_env, categorical, batch, spec_type, shape):
        env = TransformedEnv(
            continuous_env(batch_size=batch, dtype=torch.float32),
            ActionDiscretizer(5, out_action_key="action_discrete", categorical=categorical),
        )
        assert env.action_keys == ["action_discrete"]
        spec = env.full_action_spec["action_discrete"]
        assert isinstance(spec, spec_type) and spec.shape == torch.Size(shape)

    def test_single_dim_gives_categorical_or_one_hot(self):
        spec = Composite(action=Bounded(-1.0, 1.0, shape=(1,)))
        assert isinstance(
            ActionDiscretizer(3).transform_action_spec(spec.clone())["action"], Categorical
        )
        assert isinstance(
            ActionDiscretizer(3, categorical=False).transform_action_spec(spec.clone())["action"],
            OneHot,
        )

    @pytest.mark.parametrize(
        "sampling, expected",
        [("MEDIAN", [-0.75, 0.75]), ("LOW", [-1.0, 0.5]), ("HIGH", [-0.5, 1.0])],
    )
    def test_interval_values(self, continuous_env, sampling, expected):
        base = continuous_env(dtype=torch.float32)
        t = ActionDiscretizer(
            4, out_action_key="d", sampling=ActionDiscretizer.SamplingStrategy[sampling]
        )
        env = TransformedEnv(base, t)
        env.step(env.reset().set("d", torch.tensor([0, 3])))
        assert base.last_action.tolist() == pytest.approx(expected)

    def test_random_sampling_stays_in_interval(self, continuous_env):
        base = continuous_env(dtype=torch.float32)
        env = TransformedEnv(
            base, ActionDiscretizer(2, sampling=ActionDiscretizer.SamplingStrategy.RANDOM)
        )
        env.step(env.reset().set("action", torch.tensor([0, 1])))
        low, high = base.last_action.tolist()
        assert -1.0 <= low <= 0.0 <= high <= 1.0

    def test_non_bounded_action_raises(self, counting_env):
        with pytest.raises(ValueError, match=r"ActionDiscretizer expected a Bounded action spec"):
            TransformedEnv(counting_env(), ActionDiscretizer(3))

    def test_unattached_inverse_raises(self):
        with pytest.raises(
            RuntimeError, match=r"ActionDiscretizer does not know the action bounds"
        ):
            ActionDiscretizer(3).inv(TensorDict({"action": torch.tensor([0])}))

    def test_check_env_specs(self, continuous_env):
        check_env_specs(
            TransformedEnv(
                continuous_env(dtype=torch.float32), ActionDiscretizer(5, categorical=False)
            )
        )


class ScalarActionEnv(EnvBase):
    """A bounded action with no action dim (``singleton=False``) or a dim of one."""

    def __init__(self, singleton=False, **kwargs):
        super().__init__(**kwargs)
        batch = tuple(self.batch_size)
        self.action_spec = Bounded(-1.0, 1.0, shape=(*batch, 1) if singleton else batch)
        self.observation_spec = Composite(observation=Unbounded(shape=(*batch, 1)), shape=batch)
        self.reward_spec = Unbounded(shape=(*batch, 1))
        self.received = []

    def _reset(self, tensordict=None):
        return TensorDict(observation=torch.zeros(*self.batch_size, 1), batch_size=self.batch_size)

    def _step(self, tensordict):
        self.received.append(tensordict["action"].clone())
        return TensorDict(
            observation=torch.zeros(*self.batch_size, 1),
            reward=torch.zeros(*self.batch_size, 1),
            done=torch.zeros(*self.batch_size, 1, dtype=torch.bool),
            batch_size=self.batch_size,
        )

    def _set_seed(self, seed):
        return seed


class TestActionDiscretizerShapes:
    @pytest.mark.parametrize("singleton", [True, False])
    @pytest.mark.parametrize("categorical", [True, False])
    @pytest.mark.parametrize("batch_size", [(), (2,)])
    @pytest.mark.parametrize("num_intervals", [4, torch.tensor([4])])
    def test_scalar_and_batched_action_specs(self, singleton, categorical, batch_size,
                                             num_intervals):
        base = ScalarActionEnv(singleton, batch_size=batch_size)
        env = TransformedEnv(base, ActionDiscretizer(num_intervals, categorical=categorical))
        check_env_specs(env)
        env.rollout(3)
        sent = torch.stack(base.received)
        assert sent.shape[1:] == base.action_spec.shape
        assert ((sent >= -1) & (sent <= 1)).all()

    def test_renamed_action_is_recorded_as_state(self):
        env = TransformedEnv(ScalarActionEnv(True), ActionDiscretizer(4, out_action_key="choice"))
        assert env.action_keys == ["choice"]
        assert "action" in env.full_state_spec.keys()
        data = env.rollout(3)
        assert data["action"].dtype == torch.float32
        # the median of each of the 4 intervals of [-1, 1]
        expected = {0: -0.75, 1: -0.25, 2: 0.25, 3: 0.75}
        for choice, value in zip(data["choice"].reshape(-1).tolist(),
                                 data["action"].reshape(-1).tolist()):
            assert value == pytest.approx(expected[choice])


class TestDiscreteActionProjection:
    def test_policy_acts_over_max_actions_env_receives_effective(self, masked_env):
        base = masked_env(n=3)
        env = TransformedEnv(base, DiscreteActionProjection(3, 6))
        spec = env.action_spec
        assert isinstance(spec, OneHot) and spec.shape == torch.Size([6])
        data = env.rollout(4)
        assert data["action"].shape == torch.Size([4, 6])
        assert (base.last_action < 3).all()

    def test_inverse_replaces_out_of_range_actions(self):
        t = DiscreteActionProjection(2, 4)
        out = t.inv(TensorDict({"action": torch.nn.functional.one_hot(torch.tensor([1, 3]), 4)}, [2]))
        assert out["action"].shape == torch.Size([2, 2]) and out["action"][0].tolist() == [0, 1]
        assert out["action"].sum(-1).tolist() == [1, 1]

    def test_forward_maps_env_actions_to_max_actions(self):
        t = DiscreteActionProjection(2, 4)
        out = t(TensorDict({"action": torch.tensor([[0, 1], [1, 0]])}, [2]))["action"]
        assert out.tolist() == [[0, 1, 0, 0], [1, 0, 0, 0]]

    def test_inverse_of_a_wrongly_sized_action_raises(self):
        with pytest.raises(ValueError, match="max_actions=4"):
            DiscreteActionProjection(2, 4).inv(TensorDict({"action": torch.tensor([0, 1])}))

    def test_effective_above_max_raises(self):
        with pytest.raises(ValueError, match=r"expected num_actions_effective <= max_actions"):
            DiscreteActionProjection(5, 3)

    def test_check_env_specs(self, masked_env):
        check_env_specs(TransformedEnv(masked_env(n=3), DiscreteActionProjection(3, 6)))
