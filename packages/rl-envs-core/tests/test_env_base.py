"""EnvBase: construction, reset, step, bad input, seeding and misc methods."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch
from tensordict import TensorDict

from rl_envs_core import EnvBase, _transform_hook, _validation
from rl_envs_core.extension import register_transformed_env_factory
from rl_envs_core.testing import CountingEnv
from rl_specs import Bounded, Categorical, Composite, OneHot, Unbounded


class BadOutputEnv(CountingEnv):
    """CountingEnv whose _step output is edited by ``edit``."""

    def __init__(self, edit, **kwargs):
        super().__init__(**kwargs)
        self.edit = edit

    def _step(self, tensordict):
        return self.edit(super()._step(tensordict))


class BareEnv(EnvBase):
    pass


class TestEnvBase:
    def test_defaults(self):
        env = BareEnv()
        assert env.batch_size == torch.Size([])
        assert env.device is None
        assert env.batch_locked
        assert env.is_spec_locked
        assert not env.run_type_checks
        assert env.reward_spec.shape == torch.Size([1])
        assert env.done_keys == ["done", "terminated"]  # truncated only when declared
        assert env.action_keys == [] and env.state_keys == [] and env.observation_keys == []

    @pytest.mark.parametrize("batch_size", [3, [3], (3,), torch.Size([3])])
    def test_batch_size_forms(self, batch_size):
        env = BareEnv(batch_size=batch_size)
        assert env.batch_size == torch.Size([3])
        assert env.reward_spec.shape == torch.Size([3, 1])

    def test_device_is_applied_to_specs_and_outputs(self):
        env = CountingEnv(device="cpu")
        assert env.device == torch.device("cpu")
        assert env.action_spec.device == torch.device("cpu")
        assert env.reset().device == torch.device("cpu")

    @pytest.mark.parametrize("method,args", [("_step", (None,)), ("_reset", (None,)),
                                             ("_set_seed", (0,))])
    def test_abstract_methods_raise(self, method, args):
        with pytest.raises(NotImplementedError, match=f"BareEnv must implement {method}"):
            getattr(BareEnv(), method)(*args)

    def test_reset_returns_observations_and_done_flags(self):
        out = CountingEnv(batch_size=[2]).reset()
        assert set(out.keys()) == {"observation", "done", "terminated"}
        assert out.batch_size == torch.Size([2])
        assert not out["done"].any()

    def test_reset_fills_missing_done_entries_with_zeros(self):
        class NoDone(CountingEnv):
            def _reset(self, tensordict=None, **kwargs):
                return super()._reset(tensordict).exclude("done", "terminated", "truncated")

        out = NoDone().add_truncated_keys().reset()
        assert {"done", "terminated", "truncated"} <= set(out.keys())
        assert not out["truncated"].any()

    def test_step_fills_missing_done_entries_with_false(self):
        env = CountingEnv(max_steps=2).add_truncated_keys()  # declared, never written
        data = env.rollout(5)
        assert data["next", "truncated"].shape == data["next", "done"].shape
        assert not data["next", "truncated"].any()
        assert data["next", "done"][-1].all()

    def test_step_writes_next_into_the_input(self):
        env = CountingEnv()
        data = env.rand_action(env.reset())
        out = env.step(data)
        assert out is data
        assert set(out["next"].keys()) == {"observation", "reward", "done", "terminated"}
        assert out["observation"].item() == 0.0 and out["next", "observation"].item() == 1.0

    def test_lone_done_output_is_flanked(self):
        env = BadOutputEnv(lambda td: td.exclude("terminated"))
        out = env.rand_step(env.reset())
        assert torch.equal(out["next", "terminated"], out["next", "done"])

    def test_missing_action_raises_key_error(self):
        env = CountingEnv()
        with pytest.raises(KeyError, match=r"expected an action at key 'action'.*rand_action"):
            env.step(env.reset())

    def test_missing_action_after_first_step_still_explained(self):
        class ReadsAction(CountingEnv):
            def _step(self, tensordict):
                tensordict["action"]
                return super()._step(tensordict)

        env = ReadsAction()
        env.rand_step(env.reset())
        with pytest.raises(KeyError, match="expected an action at key 'action'"):
            env.step(env.reset())

    def test_wrong_action_shape_raises(self):
        env = CountingEnv(batch_size=[2])
        data = env.reset().set("action", torch.zeros(2, 3, dtype=torch.int64))
        with pytest.raises(ValueError, match=r"should have shape \(2, 1\), got \(2, 3\)"):
            env.step(data)

    def test_wrong_input_batch_size_raises(self):
        env = CountingEnv(batch_size=[2])
        data = TensorDict({"action": torch.zeros(3, 1, dtype=torch.int64)}, [3])
        with pytest.raises(ValueError, match=r"batch size \(2,\).*got \(3,\)"):
            env.step(data)

    def test_action_outside_spec_raises_with_type_checks(self):
        env = CountingEnv(run_type_checks=True)
        data = env.reset().set("action", torch.tensor([5]))
        with pytest.raises(ValueError, match="outside its spec Categorical"):
            env.step(data)
        unchecked = CountingEnv()
        assert "next" in unchecked.step(unchecked.reset().set("action", torch.tensor([5]))).keys()

    def test_action_wrong_dtype_raises_with_type_checks(self):
        env = CountingEnv(run_type_checks=True)
        with pytest.raises(TypeError, match=r"dtype torch.int64, got torch.float32"):
            env.step(env.reset().set("action", torch.tensor([1.0])))

    @pytest.mark.parametrize(
        "edit,error,match",
        [
            (lambda td: td.set("extra", torch.zeros(1)), KeyError, r"do not declare: \[.extra.\]"),
            (lambda td: td.exclude("observation"), KeyError, r"did not return.*observation"),
            (lambda td: td.set("observation", torch.zeros(3)), ValueError,
             r"'observation' with shape \(3,\), but its spec says \(1,\)"),
        ],
    )
    def test_bad_step_output_raises(self, edit, error, match):
        env = BadOutputEnv(edit)
        with pytest.raises(error, match=match):
            env.rand_step(env.reset())

    def test_validation_runs_once(self, monkeypatch):
        calls = []
        original = _validation.check_step_output
        monkeypatch.setattr(
            _validation, "check_step_output", lambda *a: calls.append(1) or original(*a)
        )
        env = CountingEnv(max_steps=100)
        env.rollout(10)
        assert len(calls) == 1

    def test_validation_reruns_after_spec_change(self):
        env = CountingEnv()
        env.rand_step(env.reset())
        env.observation_spec = Composite(observation=Unbounded(shape=(2,)))
        with pytest.raises(ValueError, match=r"its spec says \(2,\)"):
            env.rand_step(env.reset())

    def test_set_seed_returns_deterministic_next_seed(self):
        env = CountingEnv()
        first = env.set_seed(0)
        assert env.seed == 0
        assert first == CountingEnv().set_seed(0)
        assert first != CountingEnv().set_seed(1)
        assert env.set_seed(first) != first

    @pytest.mark.parametrize("seed,static,expected", [(None, False, None), (7, True, 7)])
    def test_set_seed_passthrough(self, seed, static, expected):
        assert CountingEnv().set_seed(seed, static_seed=static) == expected

    def test_rand_action_is_in_spec(self):
        env = CountingEnv(batch_size=[5])
        action = env.rand_action()["action"]
        assert env.action_spec.is_in(action)

    def test_rand_action_on_batch_unlocked_env_uses_input_batch(self):
        class Unlocked(CountingEnv):
            batch_locked = False

        env = Unlocked()
        env.action_spec = Bounded(low=-1.0, high=1.0, shape=(2,))
        assert env.rand_action(TensorDict(batch_size=[3, 4]))["action"].shape == (3, 4, 2)

    def test_rand_action_draws_per_member_for_a_stack_of_different_action_classes(self):
        env = CountingEnv(batch_size=[2])
        env.full_action_spec = torch.stack(
            [Composite(action=Bounded(-1.0, 1.0, shape=(1,))), Composite(action=OneHot(2))]
        )
        action = env.rand_action()
        assert action.batch_size == (2,)
        assert action[0]["action"].dtype == torch.float32 and action[0]["action"].shape == (1,)
        assert action[1]["action"].dtype == torch.bool and int(action[1]["action"].sum()) == 1

    def test_rand_step_steps(self):
        env = CountingEnv()
        assert env.rand_step(env.reset())["next", "observation"].item() == 1.0

    def test_fake_tensordict_has_every_declared_entry(self):
        fake = CountingEnv(batch_size=[2]).fake_tensordict()
        assert set(fake.keys(True, True)) == {
            "observation", "action", "done", "terminated",
            ("next", "observation"), ("next", "reward"), ("next", "done"),
            ("next", "terminated"),
        }
        assert fake.batch_size == torch.Size([2])

    def test_to_moves_specs(self):
        env = CountingEnv().to("cpu")
        assert env.device == torch.device("cpu")
        assert env.full_observation_spec.device == torch.device("cpu")
        assert env.is_spec_locked

    def test_maybe_reset_resets_only_done_elements(self):
        env = CountingEnv(max_steps=10, batch_size=[2])
        data = env.rollout(3)[:, -1]["next"].exclude("reward")
        data["done"] = torch.tensor([[False], [True]])
        out = env.maybe_reset(data)
        assert out is data
        assert out["observation"].squeeze(-1).tolist() == [3.0, 0.0]
        assert "_reset" not in out.keys()

    def test_maybe_reset_without_done_is_a_no_op(self):
        env = CountingEnv(batch_size=[2])
        data = env.reset()
        data["observation"] += 5
        assert env.maybe_reset(data)["observation"].squeeze(-1).tolist() == [5.0, 5.0]

    def test_add_truncated_keys(self):
        env = BareEnv()
        env.done_spec = Categorical(2, shape=(1,), dtype=torch.bool)
        assert "truncated" not in env.done_keys
        assert env.add_truncated_keys() is env
        assert env.done_keys == ["done", "terminated", "truncated"]

    def test_check_env_specs_method(self):
        env = CountingEnv()
        env.full_observation_spec = Composite(observation=Unbounded(shape=(1,), dtype=torch.int64))
        with pytest.raises(AssertionError, match="dtype mismatch"):
            env.check_env_specs()

    @pytest.mark.parametrize("copier", [lambda e: pickle.loads(pickle.dumps(e)), copy.deepcopy])
    def test_env_survives_pickle_and_deepcopy(self, copier):
        env = copier(CountingEnv(max_steps=2, batch_size=[2]))
        assert env.is_spec_locked
        assert env.rollout(5)["next", "done"][:, -1].all()

    def test_repr_and_close(self):
        env = CountingEnv()
        assert "CountingEnv(batch_size=()" in repr(env)
        env.close()
        assert env.is_closed

    def test_marl_spec_creation_example(self):
        """The documented multi-agent spec creation, with stacked per-agent specs."""
        env = BareEnv(batch_size=[3])
        n_agents = 2
        action_specs = [Bounded(low=-1.0, high=1.0, shape=(3, 2)) for _ in range(n_agents)]
        reward_specs = [Unbounded(shape=(3, 1)) for _ in range(n_agents)]
        observation_specs = [Unbounded(shape=(3, 4)) for _ in range(n_agents)]
        env.action_spec = Composite(
            {"agents": Composite({"action": torch.stack(action_specs, 1)}, shape=(3, n_agents))},
            shape=(3,),
        )
        env.reward_spec = Composite(
            {"agents": Composite({"reward": torch.stack(reward_specs, 1)}, shape=(3, n_agents))},
            shape=(3,),
        )
        env.observation_spec = Composite(
            {"agents": Composite({"observation": torch.stack(observation_specs, 1)},
                                 shape=(3, n_agents))},
            shape=(3,),
        )
        env.done_spec = Categorical(n=2, shape=torch.Size((3, 1)), dtype=torch.bool)
        assert env.action_key == ("agents", "action")
        assert env.reward_key == ("agents", "reward")
        assert env.reward_spec == env.output_spec["full_reward_spec"][env.reward_key]
        assert env.reward_spec == torch.stack(reward_specs, 1)
        assert env.action_spec.shape == torch.Size([3, n_agents, 2])
        assert env.done_keys == ["done", "terminated"]
        assert env.rand_action()["agents", "action"].shape == torch.Size([3, n_agents, 2])


class TestAppendTransform:
    def test_without_rl_transforms_raises_import_error_with_install_line(self, monkeypatch):
        monkeypatch.setattr(_transform_hook, "_FACTORY", [])
        with pytest.raises(ImportError, match="pip install rl-transforms"):
            CountingEnv().append_transform(lambda td: td)

    def test_registered_factory_builds_the_transformed_env(self, monkeypatch):
        monkeypatch.setattr(_transform_hook, "_FACTORY", [])
        register_transformed_env_factory(lambda env, transform: (env, transform))
        env = CountingEnv()

        def transform(td):
            return td

        assert env.append_transform(transform) == (env, transform)


def test_shape_is_the_batch_size():
    from rl_envs_core.testing import CountingEnv

    assert CountingEnv(batch_size=[3]).shape == torch.Size([3])


class ScalarDoneEnv(EnvBase):
    """Declares (1,)-shaped done flags but returns plain Python bools from _step."""

    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(observation=Unbounded((2,)))
        self.action_spec = Categorical(2, (1,), dtype=torch.bool)
        self.reward_spec = Unbounded((1,))

    def _reset(self, tensordict):
        return TensorDict({"observation": torch.zeros(2)})

    def _step(self, tensordict):
        return TensorDict(
            {
                "observation": torch.ones(2),
                "reward": torch.ones(1),
                "done": False,
                "terminated": False,
            }
        )

    def _set_seed(self, seed):
        pass


def test_scalar_done_flags_take_the_spec_shape_on_every_step():
    env = ScalarDoneEnv()
    data = env.rollout(3)
    assert data["next", "done"].shape == (3, 1)
    assert data["next", "terminated"].shape == (3, 1)
    assert not data["next", "done"].any()


def test_an_action_with_the_spec_numel_in_another_shape_is_accepted():
    env = CountingEnv(max_steps=5, batch_size=[2])
    data = env.rollout(3, lambda td: td.set("action", torch.ones(2, dtype=torch.long)))
    assert data["next", "observation"][:, -1].flatten().tolist() == [3.0, 3.0]
