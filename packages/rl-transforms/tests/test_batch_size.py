"""BatchSizeTransform: reshape an env's batch, or batch an env that is not batch-locked."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict, TensorDictBase

from rl_envs_core import EnvBase, check_env_specs
from rl_envs_core.testing import CountingEnv
from rl_specs import Composite, Unbounded
from rl_transforms import BatchSizeTransform, Compose, StepCounter, Transform, TransformedEnv


class StatelessEnv(EnvBase):
    """Steps whatever batch it is given: obs += action."""

    batch_locked = False

    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(observation=Unbounded(3))
        self.reward_spec = Unbounded(1)
        self.action_spec = Unbounded(1)

    def _reset(self, tensordict=None, **kwargs) -> TensorDictBase:
        batch = tensordict.batch_size if tensordict is not None else torch.Size([])
        out = self.observation_spec.zero(batch)
        out.update(self.full_done_spec.zero(batch))
        return out

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        batch = tensordict.batch_size
        out = TensorDict({"observation": tensordict["observation"] + tensordict["action"]}, batch)
        out.update(self.full_done_spec.zero(batch))
        out.set("reward", tensordict["action"].clone())
        return out

    def _set_seed(self, seed):
        return None


class TestBatchSizeTransform:
    def test_batch_size_runs_a_stateless_env_batched(self):
        env = TransformedEnv(StatelessEnv(), BatchSizeTransform(batch_size=[5]))
        assert env.batch_size == (5,)
        assert env.observation_spec["observation"].shape == (5, 3)
        data = env.rollout(4, lambda td: td.set("action", torch.arange(5.0).unsqueeze(-1)))
        assert data.shape == (5, 4)
        assert data["next", "observation"][:, -1, 0].tolist() == [0.0, 4.0, 8.0, 12.0, 16.0]
        check_env_specs(env)

    def test_reset_func_builds_the_first_data(self):
        def reset_func(tensordict, tensordict_reset):
            out = TensorDict(observation=torch.arange(3.0).expand(2, 3).clone(), batch_size=[2])
            return out.update(tensordict_reset.expand(2).clone().exclude("observation"))

        env = TransformedEnv(
            StatelessEnv(), BatchSizeTransform(batch_size=[2], reset_func=reset_func)
        )
        assert env.reset()["observation"][1].tolist() == [0.0, 1.0, 2.0]

    def test_reset_func_receives_the_env_when_asked(self):
        seen = []

        def reset_func(tensordict, tensordict_reset, env):
            seen.append(env)
            return tensordict_reset

        env = TransformedEnv(
            StatelessEnv(),
            BatchSizeTransform(batch_size=[3], reset_func=reset_func, env_kwarg=True),
        )
        assert env.reset().batch_size == (3,)
        assert seen[-1] is env

    def test_reshape_fn_reshapes_a_batched_env(self):
        env = TransformedEnv(
            CountingEnv(batch_size=[4]), BatchSizeTransform(reshape_fn=lambda td: td.reshape(2, 2))
        )
        assert env.batch_size == (2, 2)
        assert env.action_spec.shape == (2, 2, 1)
        assert env.rollout(3).shape == (2, 2, 3)
        check_env_specs(env)

    def test_batch_size_with_as_many_elements_reshapes(self):
        env = TransformedEnv(CountingEnv(batch_size=[4]), BatchSizeTransform(batch_size=[2, 2]))
        assert env.rollout(2)["next", "observation"].shape == (2, 2, 2, 1)

    def test_partial_reset_reaches_the_base_env_in_its_own_shape(self):
        env = TransformedEnv(
            CountingEnv(max_steps=2, batch_size=[4]), BatchSizeTransform(batch_size=[2, 2])
        )
        data = env.rollout(5, break_when_any_done=False)
        assert data.shape == (2, 2, 5)
        assert data["next", "observation"][1, 1].squeeze(-1).tolist() == [1.0, 2.0, 1.0, 2.0, 1.0]

    def test_unsqueeze_an_unbatched_env(self):
        env = TransformedEnv(
            CountingEnv(max_steps=2), BatchSizeTransform(reshape_fn=lambda td: td.unsqueeze(0))
        )
        data = env.rollout(4, break_when_any_done=False)
        assert data.shape == (1, 4)

    def test_transforms_after_see_the_new_batch(self):
        env = TransformedEnv(
            CountingEnv(batch_size=[4]),
            Compose(BatchSizeTransform(batch_size=[2, 2]), StepCounter()),
        )
        assert env.rollout(2)["next", "step_count"].shape == (2, 2, 2, 1)

    def test_squeeze_to_an_unbatched_env(self):
        env = TransformedEnv(
            CountingEnv(max_steps=3, batch_size=[1]),
            BatchSizeTransform(reshape_fn=lambda td: td.squeeze(0)),
        )
        assert env.batch_size == ()
        assert env.action_spec.shape == (1,)
        assert env.rollout(5).shape == (3,)
        check_env_specs(env)

    def test_in_a_replay_buffer_path_it_reshapes_both_ways_without_an_env(self):
        t = BatchSizeTransform(reshape_fn=lambda td: td.reshape(2, 2))
        data = TensorDict(a=torch.arange(4.0), batch_size=[4])
        assert t(data).batch_size == (2, 2)
        assert t.inv(data).batch_size == (4,)

    def test_forward_reshapes_data(self):
        t = BatchSizeTransform(reshape_fn=lambda td: td.reshape(-1))
        assert t(TensorDict(a=torch.zeros(2, 3), batch_size=[2, 3])).batch_size == (6,)

    def test_incompatible_batch_size_raises(self):
        with pytest.raises(ValueError, match=r"batch size \(4,\).*\(3,\)"):
            TransformedEnv(CountingEnv(batch_size=[4]), BatchSizeTransform(batch_size=[3]))

    def test_reshape_fn_changing_the_element_count_raises(self):
        with pytest.raises(ValueError, match=r"keep the number of elements"):
            TransformedEnv(
                CountingEnv(batch_size=[4]), BatchSizeTransform(reshape_fn=lambda td: td[:2])
            )

    @pytest.mark.parametrize("kwargs", [{}, {"batch_size": [2], "reshape_fn": lambda td: td}])
    def test_exactly_one_of_batch_size_and_reshape_fn(self, kwargs):
        with pytest.raises(ValueError, match=r"exactly one of batch_size and reshape_fn"):
            BatchSizeTransform(**kwargs)

    def test_env_kwarg_needs_an_env_parameter(self):
        with pytest.raises(TypeError, match=r"no 'env' keyword"):
            BatchSizeTransform(batch_size=[2], reset_func=lambda a, b: b, env_kwarg=True)


class TestReshapeFastPath:
    """The per-step reshape builds the same data as ``TensorDict.reshape``."""

    def test_nested_tensordict_equals_the_generic_reshape(self):
        from rl_transforms._batch_size import _reshape

        data = TensorDict(
            {
                "obs": torch.arange(48.0).reshape(16, 3),
                "done": torch.zeros(16, 1, dtype=torch.bool),
                "nested": {"x": torch.arange(16).reshape(16, 1, 1)},
            },
            batch_size=[16],
        )
        fast = _reshape(data, torch.Size([4, 4]))
        generic = data.reshape(4, 4)
        assert fast.batch_size == generic.batch_size == torch.Size([4, 4])
        assert fast["nested"].batch_size == torch.Size([4, 4])
        assert set(fast.keys(True, True)) == set(generic.keys(True, True))
        assert (fast == generic).all()
        back = _reshape(fast, torch.Size([16]))
        assert (back == data).all() and back.batch_size == data.batch_size

    def test_a_nested_tensordict_with_more_batch_dims_takes_the_generic_path(self):
        from rl_transforms._batch_size import _reshape

        data = TensorDict(
            {"obs": torch.zeros(16, 2), "nested": TensorDict({"x": torch.ones(16, 3, 5)}, [16, 3])},
            batch_size=[16],
        )
        out = _reshape(data, torch.Size([4, 4]))
        assert out["nested"].batch_size == torch.Size([4, 4, 3])
        assert out["nested", "x"].shape == torch.Size([4, 4, 3, 5])

    def test_rollout_matches_a_rollout_reshaped_afterwards(self):
        env = TransformedEnv(
            CountingEnv(batch_size=[6]), BatchSizeTransform(reshape_fn=lambda td: td.reshape(2, 3))
        )
        bare = CountingEnv(batch_size=[6])
        out = env.rollout(4, lambda td: td.set("action", env.action_spec.one()))
        reference = bare.rollout(4, lambda td: td.set("action", bare.action_spec.one()))
        reference = reference.reshape(2, 3, 4)
        assert out.batch_size == torch.Size([2, 3, 4])
        for key in reference.keys(True, True):
            assert torch.equal(out[key], reference[key]), key


class _ZeroAction(Transform):
    """An inverse that writes into the data it receives (the action, zeroed)."""

    def __init__(self):
        super().__init__(in_keys_inv=["action"], out_keys_inv=["action"])

    def _inv_apply_transform(self, action):
        return torch.zeros_like(action)


class TestStepInputUntouched:
    """The caller's step input never shows inverse-transformed entries.

    TransformedEnv copies the step input for the inverse chain only when an inverse
    may write into it; BatchSizeTransform's inverse builds new data, so it needs none.
    """

    def test_batch_size_inverse_needs_no_copy_and_leaves_the_input_alone(self):
        env = TransformedEnv(
            CountingEnv(batch_size=[4]), BatchSizeTransform(reshape_fn=lambda td: td.reshape(2, 2))
        )
        assert not env.transform._inv_writes_input()
        td = env.reset().set("action", torch.ones(2, 2, 1, dtype=torch.int64))
        before = dict(td.items())
        out = env.step(td)
        assert out["next", "observation"].shape == torch.Size([2, 2, 1])
        assert td.batch_size == torch.Size([2, 2])
        for key, value in before.items():
            assert td.get(key) is value

    def test_a_writing_inverse_after_it_still_works_on_a_copy(self):
        base = CountingEnv(batch_size=[4])
        seen = []
        step = base._step
        base._step = lambda tensordict: seen.append(tensordict.get("action")) or step(tensordict)
        env = TransformedEnv(
            base,
            Compose(BatchSizeTransform(reshape_fn=lambda td: td.reshape(2, 2)), _ZeroAction()),
        )
        assert env.transform._inv_writes_input()
        action = torch.ones(2, 2, 1, dtype=torch.int64)
        td = env.reset().set("action", action)
        env.step(td)
        assert td.get("action") is action and bool((action == 1).all())
        assert seen[-1].shape == torch.Size([4, 1]) and not bool(seen[-1].any())

    def test_next_input_reuses_the_base_env_tensors(self):
        base = CountingEnv(batch_size=[4])
        seen = []
        step = base._step

        def spy(tensordict):
            seen.append(tensordict.get("observation"))
            return step(tensordict)

        base._step = spy
        env = TransformedEnv(base, BatchSizeTransform(reshape_fn=lambda td: td.reshape(2, 2)))
        out = env.rollout(4, lambda td: td.set("action", torch.ones(2, 2, 1, dtype=torch.int64)))
        assert out["next", "observation"][..., -1, 0].eq(4).all()
        assert all(obs.shape == torch.Size([4, 1]) for obs in seen)
        # each step's input observation holds the values of the previous step's output
        for t in range(1, 4):
            assert torch.equal(seen[t].reshape(2, 2, 1), out["observation"][:, :, t])
