"""Transform and Compose: keys, hooks, inverse, specs, parenthood, cloning."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_specs import Bounded, Composite, Unbounded
from rl_transforms import (
    Compose,
    FrameSkipTransform,
    ObservationNorm,
    ObservationTransform,
    RewardScaling,
    StepCounter,
    Transform,
    TransformedEnv,
)


class AddOne(Transform):
    def _apply_transform(self, obs):
        return obs + 1

    def _inv_apply_transform(self, state):
        return state - 1


class TestTransform:
    def test_out_keys_default_to_in_keys(self):
        t = AddOne(in_keys=["a", ("b", "c")])
        assert t.out_keys == ["a", ("b", "c")]
        assert t.out_keys is not t.in_keys

    def test_single_key_and_nested_tuple_are_normalised(self):
        t = AddOne(in_keys="a", in_keys_inv=(("x", "y"),))
        assert t.in_keys == ["a"]
        assert t.in_keys_inv == [("x", "y")]
        assert t.out_keys_inv == [("x", "y")]

    @pytest.mark.parametrize(
        "kwargs, names",
        [
            ({"in_keys": ["a", "b"], "out_keys": ["c"]}, "in_keys and out_keys"),
            ({"in_keys_inv": ["a"], "out_keys_inv": ["b", "c"]}, "in_keys_inv and out_keys_inv"),
        ],
    )
    def test_mismatched_key_lengths_raise(self, kwargs, names):
        with pytest.raises(ValueError, match=f"AddOne expected {names} of the same length"):
            AddOne(**kwargs)

    def test_bad_key_type_raises(self):
        with pytest.raises(TypeError, match=r"AddOne expected in_keys to hold string"):
            AddOne(in_keys=[3])

    def test_forward_writes_out_keys(self):
        td = TensorDict({"a": torch.zeros(2)})
        out = AddOne(in_keys=["a"], out_keys=["b"])(td)
        assert (out["b"] == 1).all() and (out["a"] == 0).all()

    def test_missing_key_raises_naming_transform_and_key(self):
        with pytest.raises(
            KeyError, match=r"AddOne expected the entry 'zz'.*available entries: \['a'\]"
        ):
            AddOne(in_keys=["zz"])(TensorDict({"a": torch.zeros(1)}))

    def test_missing_tolerance_skips(self):
        t = AddOne(in_keys=["zz"])
        t.set_missing_tolerance(True)
        assert t.missing_tolerance
        assert "zz" not in t(TensorDict({"a": torch.zeros(1)})).keys()

    def test_inv_maps_out_keys_inv_to_in_keys_inv_on_a_copy(self):
        td = TensorDict({"act": torch.ones(2)})
        out = AddOne(in_keys_inv=["action"], out_keys_inv=["act"]).inv(td)
        assert (out["action"] == 0).all()
        assert "action" not in td.keys()

    def test_inv_on_missing_action_raises(self):
        with pytest.raises(KeyError, match=r"AddOne expected the entry 'action'.*out_keys_inv"):
            AddOne(in_keys_inv=["action"]).inv(TensorDict({"obs": torch.zeros(1)}))

    def test_unimplemented_apply_transform_raises(self):
        with pytest.raises(NotImplementedError, match=r"Transform has in_keys=\['a'\]"):
            Transform(in_keys=["a"])(TensorDict({"a": torch.zeros(1)}))

    def test_reset_skips_missing_entries(self):
        t = AddOne(in_keys=["a", "b"])
        out = t._reset(TensorDict(), TensorDict({"a": torch.zeros(1)}))
        assert out["a"].item() == 1 and "b" not in out.keys()
        assert not t.missing_tolerance

    def test_step_defaults_to_call(self):
        out = AddOne(in_keys=["a"])._step(TensorDict(), TensorDict({"a": torch.zeros(1)}))
        assert out["a"].item() == 1

    def test_observation_spec_maps_in_to_out(self):
        spec = Composite(a=Unbounded(shape=(2,)))
        out = AddOne(in_keys=["a"], out_keys=["b"]).transform_observation_spec(spec)
        assert set(out.keys()) == {"a", "b"}

    def test_action_spec_exposes_out_keys_inv_only(self):
        spec = Composite(action=Bounded(-1.0, 1.0, shape=(2,)))
        out = AddOne(in_keys_inv=["action"], out_keys_inv=["act"]).transform_action_spec(spec)
        assert set(out.keys()) == {"act"}

    def test_clone_shares_buffers_and_drops_parent(self, counting_env):
        norm = ObservationNorm(loc=0.0, scale=1.0)
        TransformedEnv(counting_env(), norm)
        copy = norm.clone()
        assert copy.parent is None and norm.parent is not None
        assert copy.loc is norm.loc and copy is not norm

    def test_clone_does_not_copy_the_cached_parent(self, counting_env):
        skip = FrameSkipTransform(2)
        env = TransformedEnv(counting_env(max_steps=10), skip)
        env.rollout(2)
        parent = skip._lazy["parent"]
        copy = skip.clone()
        assert copy._lazy == {} and skip._lazy["parent"] is parent

    def test_parent_is_none_without_env(self):
        t = AddOne()
        assert t.parent is None and t.container is None

    def test_second_container_raises(self, counting_env):
        t = StepCounter()
        TransformedEnv(counting_env(), t)
        with pytest.raises(
            ValueError, match=r"StepCounter already belongs to a TransformedEnv.*clone"
        ):
            TransformedEnv(counting_env(), t)

    def test_reset_parent_allows_reuse(self, counting_env):
        t = StepCounter()
        TransformedEnv(counting_env(), t)
        t.reset_parent()
        assert TransformedEnv(counting_env(), t).transform is t


class TestCompose:
    def test_transforms_given_as_a_keyword_list(self):
        t = Compose(
            transforms=[RewardScaling(loc=1.0, scale=1.0), RewardScaling(loc=0.0, scale=2.0)]
        )
        assert len(t) == 2
        assert t(TensorDict({"reward": torch.zeros(1)}))["reward"].item() == 2.0

    def test_transforms_given_both_ways_raise(self):
        with pytest.raises(TypeError, match="Pass them one way"):
            Compose(
                RewardScaling(loc=0.0, scale=1.0), transforms=[RewardScaling(loc=0.0, scale=1.0)]
            )

    def test_forward_runs_in_order(self):
        t = Compose(RewardScaling(loc=1.0, scale=1.0), RewardScaling(loc=0.0, scale=2.0))
        assert t(TensorDict({"reward": torch.zeros(1)}))["reward"].item() == 2.0

    def test_inverse_runs_in_reverse_order(self):
        order = []

        class Log(Transform):
            def __init__(self, name):
                super().__init__(in_keys_inv=["x"])
                self.name = name

            def _inv_apply_transform(self, state):
                order.append(self.name)
                return state

        Compose(Log("inner"), Log("outer")).inv(TensorDict({"x": torch.zeros(1)}))
        assert order == ["outer", "inner"]

    def test_callables_work_as_transforms(self):
        def double(td):
            return td.set("a", td["a"] * 2)

        t = Compose(double, AddOne(in_keys=["a"]))
        assert t(TensorDict({"a": torch.ones(1)}))["a"].item() == 3.0

    def test_non_callable_raises(self):
        with pytest.raises(TypeError, match=r"Expected a Transform or a callable"):
            Compose(3)

    def test_indexing_keeps_parent(self, counting_env):
        env = TransformedEnv(
            counting_env(), Compose(StepCounter(), AddOne(in_keys=["observation"]))
        )
        assert env.transform[1].parent is not None
        assert env.transform[1].container is env.transform

    def test_slicing_returns_parentless_clones(self, counting_env):
        t1, t2, t3 = (
            StepCounter(),
            AddOne(in_keys=["observation"]),
            ObservationNorm(loc=0.0, scale=1.0),
        )
        env = TransformedEnv(counting_env(), Compose(t1, t2, t3))
        last_two = env.transform[-2:]
        assert isinstance(last_two, Compose) and last_two.parent is None
        assert last_two[0] is not t2 and isinstance(last_two[0], type(t2))
        assert last_two[1] is not t3 and last_two[1].loc is t3.loc

    def test_parent_holds_previous_transforms(self, counting_env):
        env = TransformedEnv(
            counting_env(), Compose(StepCounter(), AddOne(in_keys=["observation"]))
        )
        parent = env.transform[-1].parent
        assert isinstance(parent, TransformedEnv)
        assert [type(t) for t in parent.transform] == [StepCounter]
        assert "step_count" in parent.observation_spec.keys()

    def test_append_insert_len_iter(self):
        t = Compose(AddOne(in_keys=["a"]))
        t.append(StepCounter())
        t.insert(0, RewardScaling(0.0, 1.0))
        assert len(t) == 3
        assert [type(x) for x in t] == [RewardScaling, AddOne, StepCounter]
        assert all(x.container is t for x in t)

    def test_insert_out_of_range_raises(self):
        with pytest.raises(IndexError, match=r"Compose.insert expected an index in \[-1, 1\]"):
            Compose(AddOne()).insert(5, AddOne())

    def test_transform_of_a_compose_without_env_can_move(self):
        a = AddOne()
        first = Compose(a)
        second = Compose(AddOne(), *first)
        assert second[1] is a and a.container is second

    def test_append_of_a_transform_attached_to_an_env_raises(self, counting_env):
        a = AddOne()
        TransformedEnv(counting_env(), Compose(a))
        with pytest.raises(ValueError, match=r"AddOne already belongs to a Compose"):
            Compose().append(a)

    def test_index_with_list_gives_clones(self):
        a, b = AddOne(in_keys=["a"]), AddOne(in_keys=["b"])
        sub = Compose(a, b)[[1]]
        assert len(sub) == 1 and sub[0] is not b and sub[0].in_keys == ["b"]

    def test_spec_hooks_chain(self):
        spec = Composite(reward=Unbounded(shape=(1,)))
        out = Compose(
            AddOne(in_keys=["reward"], out_keys=["r1"]), AddOne(in_keys=["r1"], out_keys=["r2"])
        )
        assert set(out.transform_reward_spec(spec).keys()) == {"reward", "r1", "r2"}


class TestObservationTransform:
    def test_defaults_to_observation_entries_and_skips_missing(self):
        class Negate(ObservationTransform):
            def _apply_transform(self, obs):
                return -obs

        t = Negate()
        assert t.in_keys == ["observation", "pixels", "observation_vector"]
        out = t(TensorDict({"pixels": torch.ones(1)}))
        assert out["pixels"].item() == -1.0

    def test_explicit_keys(self):
        class Negate(ObservationTransform):
            def _apply_transform(self, obs):
                return -obs

        assert (
            Negate(in_keys=["a"], out_keys=["b"])(TensorDict({"a": torch.ones(1)}))["b"].item()
            == -1.0
        )
