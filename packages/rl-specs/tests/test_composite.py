"""Composite: the dict API, locking, generation over the tree and the shape ops."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from tensordict import TensorDict, tensorclass

from rl_specs import (
    Binary,
    Bounded,
    Categorical,
    Composite,
    NonTensor,
    OneHot,
    Unbounded,
)


def make_spec() -> Composite:
    return Composite(
        obs=Unbounded(shape=(4, 3)),
        action=Bounded(low=-1, high=1, shape=(4, 2)),
        next=Composite(
            reward=Unbounded(shape=(4, 1)),
            done=Categorical(2, shape=(4, 1), dtype=torch.bool),
            shape=(4,),
        ),
        shape=(4,),
    )


@tensorclass
class _Pair:
    obs: torch.Tensor


class TestComposite:
    def test_construction_forms(self):
        by_dict = Composite({"a": Unbounded(shape=(2,))})
        by_kwargs = Composite(a=Unbounded(shape=(2,)))
        assert by_dict == by_kwargs
        nested = Composite({"outer": {"inner": Unbounded(shape=(2, 1))}}, shape=(2,))
        assert isinstance(nested["outer"], Composite) and nested["outer"].shape == (2,)
        assert Composite().shape == () and len(Composite()) == 0

    def test_too_many_positional_args(self):
        with pytest.raises(TypeError, match="at most one positional"):
            Composite({}, {})

    def test_child_shape_must_start_with_batch(self):
        with pytest.raises(ValueError, match=r"batch shape \(8,\).*shape=\(8, \.\.\.\)"):
            Composite(a=Unbounded(shape=(3,)), shape=(8,))
        spec = Composite(shape=(8,))
        with pytest.raises(ValueError, match="starting with it"):
            spec["a"] = Unbounded(shape=(7, 2))

    def test_non_spec_value_raises(self):
        with pytest.raises(TypeError, match="expected a TensorSpec"):
            Composite(a=torch.zeros(2))

    def test_bad_key_type_raises(self):
        spec = Composite()
        with pytest.raises(TypeError, match="strings or tuples of strings"):
            spec[3.5] = Unbounded()
        with pytest.raises(TypeError, match="empty tuple"):
            spec[()] = Unbounded()

    def test_device_mismatch_raises(self):
        spec = Composite(device="cpu")
        with pytest.raises(ValueError, match="on device"):
            spec["a"] = Unbounded(device="meta")
        spec["b"] = Unbounded()
        assert spec["b"].device == torch.device("cpu")

    def test_default_device_entries_move_to_composite_device(self):
        spec = Composite(a=Unbounded(shape=(2,)), b=Composite(c=Unbounded()), device="meta")
        assert spec["a"].device.type == "meta" and spec["b", "c"].device.type == "meta"
        assert spec.device.type == "meta" and Composite().device is None

    def test_nested_keys(self):
        spec = make_spec()
        assert spec["next", "reward"] is spec["next"]["reward"]
        assert spec[("next", "reward")] is spec[("next", ("reward",))]
        spec["a", "b", "c"] = Unbounded(shape=(4, 5))
        assert spec["a"].shape == (4,) and spec["a", "b"].shape == (4,)
        assert ("a", "b", "c") in spec and ("a", "x") not in spec and 3 not in spec
        del spec["a", "b", "c"]
        assert ("a", "b", "c") not in spec and ("a", "b") in spec

    def test_missing_key_lists_available(self):
        spec = make_spec()
        with pytest.raises(KeyError, match=r"No spec at key .nope.*Available keys"):
            spec["nope"]
        with pytest.raises(KeyError, match="No spec at key"):
            spec["next", "nope"]
        with pytest.raises(KeyError, match="No spec at key"):
            del spec["nope"]
        with pytest.raises(KeyError, match="not a Composite"):
            spec["obs", "deeper"]
        with pytest.raises(KeyError, match="not a Composite"):
            spec["obs", "deeper"] = Unbounded(shape=(4,))
        assert spec.get("nope") is None and spec.get("nope", 3) == 3

    def test_keys_items_values(self):
        spec = make_spec()
        assert list(spec.keys()) == ["obs", "action", "next"]
        leaves = list(spec.keys(include_nested=True, leaves_only=True))
        assert leaves == ["obs", "action", ("next", "reward"), ("next", "done")]
        everything = spec.keys(True)
        assert len(everything) == 5 and ("next", "done") in everything and "next" in everything
        # nested keys come before their composite, so deleting them in order just works
        assert list(everything)[2:] == [("next", "reward"), ("next", "done"), "next"]
        for key in list(everything):
            del spec[key]
        assert len(spec) == 0
        spec = make_spec()
        assert "next" not in spec.keys(True, True)
        assert dict(spec.items())["obs"] is spec["obs"]
        assert len(list(spec.values(True, True))) == 4
        assert list(spec) == ["obs", "action", "next"] and len(spec) == 3
        custom = spec.keys(True, True, is_leaf=lambda cls: cls is not Composite)
        assert set(custom) == set(leaves)
        assert spec.keys() == ["obs", "action", "next"]
        assert "_CompositeKeysView" in repr(spec.keys())

    def test_set_update_pop_select_exclude(self):
        spec = make_spec()
        assert spec.set("extra", Unbounded(shape=(4,))) is spec
        spec.update({"next": Composite(truncated=Binary(1, shape=(4, 1)), shape=(4,))})
        assert ("next", "reward") in spec and ("next", "truncated") in spec
        assert spec.pop("extra").shape == (4,) and "extra" not in spec
        assert spec.pop("extra", None) is None
        with pytest.raises(KeyError):
            spec.pop("extra")
        selected = spec.select("obs", ("next", "done"))
        assert set(selected.keys(True, True)) == {"obs", ("next", "done")}
        with pytest.raises(KeyError):
            spec.select("nope")
        assert spec.select("nope", strict=False).is_empty()
        excluded = spec.exclude("action", ("next", "reward"))
        assert set(excluded.keys(True, True)) == {"obs", ("next", "done"), ("next", "truncated")}
        assert "action" in spec

    def test_empty(self):
        spec = make_spec()
        empty = spec.empty()
        assert empty.shape == spec.shape and empty.is_empty() and not spec.is_empty()
        assert Composite(a=Composite()).is_empty(recurse=True)
        assert not Composite(a=Composite()).is_empty()

    def test_lock_unlock(self):
        spec = make_spec()
        assert not spec.is_locked
        spec.lock_()
        assert spec.is_locked and spec["next"].is_locked
        for mutate in (
            lambda: spec.__setitem__("new", Unbounded(shape=(4,))),
            lambda: spec.__setitem__(("next", "new"), Unbounded(shape=(4,))),
            lambda: spec.__setitem__(("fresh", "new"), Unbounded(shape=(4,))),
            lambda: spec.__delitem__("obs"),
            lambda: spec.update({"obs": Unbounded(shape=(4, 3))}),
            lambda: setattr(spec, "shape", (4,)),
        ):
            with pytest.raises(RuntimeError, match=r"locked.*unlock_\(\)"):
                mutate()
        assert not spec.clone().is_locked
        spec.unlock_()
        assert not spec["next"].is_locked
        spec["new"] = Unbounded(shape=(4,))
        spec.lock_(recurse=False)
        assert spec.is_locked and not spec["next"].is_locked

    @pytest.mark.parametrize("method", ["rand", "zero", "one"])
    def test_generation_over_tree(self, method):
        spec = make_spec()
        spec["none_entry"] = None
        data = getattr(spec, method)()
        assert isinstance(data, TensorDict) and data.batch_size == (4,)
        assert data["next", "done"].dtype is torch.bool
        assert "none_entry" not in data.keys()
        batched = getattr(spec, method)((2, 3))
        assert batched.batch_size == (2, 3, 4) and batched["obs"].shape == (2, 3, 4, 3)

    def test_rand_with_non_tensor_leaf(self):
        spec = Composite(text=NonTensor(shape=(2,), example_data="hi"), shape=(2,))
        assert spec.rand()["text"] == "hi"

    def test_data_cls(self):
        spec = Composite(obs=Unbounded(shape=(3,)), data_cls=_Pair)
        assert isinstance(spec.rand(), _Pair)

    def test_is_in_and_assert_is_in(self):
        spec = make_spec()
        data = spec.rand()
        assert spec.is_in(data)
        data["action"] = torch.full((4, 2), 5.0)
        assert not spec.is_in(data)
        with pytest.raises(ValueError, match="At key 'action'"):
            spec.assert_is_in(data)
        del data["obs"]
        with pytest.raises(KeyError, match="is_in expected key 'obs'"):
            spec.is_in(data)
        with pytest.raises(KeyError, match="expected key 'obs'"):
            spec.assert_is_in(data)

    def test_is_in_needs_no_data_for_none_or_empty_entries(self):
        spec = Composite(obs=Unbounded(shape=(3,)), missing=None, empty=Composite())
        assert spec.is_in(TensorDict(obs=torch.zeros(3)))

    def test_project_in_place(self):
        spec = make_spec()
        data = spec.rand()
        data["action"] = torch.full((4, 2), 5.0)
        data["next", "reward"] = torch.zeros(4, 1, dtype=torch.int64)
        out = spec.project(data)
        assert out is data and spec.is_in(data)
        assert bool((data["action"] == 1).all())

    def test_encode_and_to_numpy(self):
        spec = make_spec()
        arrays = spec.to_numpy(spec.rand())
        assert isinstance(arrays["next"]["reward"], np.ndarray)
        encoded = spec.encode(arrays)
        assert spec.is_in(encoded) and encoded.batch_size == (4,)
        with pytest.raises(KeyError, match="unknown to the spec"):
            spec.encode({"nope": np.zeros(1)})

    def test_type_check(self):
        spec = make_spec()
        spec.type_check(spec.rand())
        bad = spec.rand()
        bad["obs"] = torch.zeros(4, 3, dtype=torch.int64)
        with pytest.raises(TypeError, match="at key 'obs'"):
            spec.type_check(bad)
        spec.type_check(bad, "action")
        spec.type_check(bad, ["action", "next"])
        with pytest.raises(TypeError, match="at key 'obs'"):
            spec.type_check(bad, ["action", "obs"])

    def test_type_check_of_one_entry(self):
        spec = make_spec()
        spec.type_check(torch.zeros(4, 3), "obs")
        spec.type_check(torch.zeros(4, 1), ("next", "reward"))
        with pytest.raises(TypeError, match=r"at key \('next', 'done'\) expected dtype torch.bool"):
            spec.type_check(torch.zeros(4, 1), ("next", "done"))
        with pytest.raises(TypeError, match="value of one entry"):
            spec.type_check(torch.zeros(4, 3))

    def test_shape_ops(self):
        spec = make_spec()
        assert spec[0].shape == () and spec[0]["next", "reward"].shape == (1,)
        assert spec[1:3]["obs"].shape == (2, 3)
        expanded = spec.expand(5, 4)
        assert expanded.shape == (5, 4) and expanded["next", "done"].shape == (5, 4, 1)
        assert spec.expand(5, -1).shape == (5, 4)
        assert spec.unsqueeze(0)["obs"].shape == (1, 4, 3)
        assert torch.unsqueeze(spec, 0) == spec.unsqueeze(0)
        assert torch.index_select(spec, 0, torch.tensor([1, 3]))["obs"].shape == (2, 3)
        assert spec.unsqueeze(-1).shape == (4, 1)
        assert spec.unsqueeze(0).squeeze(0) == spec
        assert spec.unsqueeze(0).squeeze() == spec and spec.squeeze(0) == spec
        assert spec.reshape(2, 2)["action"].shape == (2, 2, 2)
        assert spec.view(2, 2).shape == (2, 2)
        assert spec.reshape(2, 2).flatten(0, 1) == spec
        parts = spec.unbind(0)
        assert len(parts) == 4 and parts[3] == spec[3]
        with pytest.raises(ValueError, match="must end with the spec's shape"):
            spec.expand(3)

    def test_shape_setter(self):
        spec = Composite(a=Unbounded(shape=(4, 3)))
        spec.shape = (4,)
        assert spec.shape == (4,)
        with pytest.raises(ValueError, match="does not start with it"):
            spec.shape = (5,)

    def test_shape_setter_carries_nested_composites_along(self):
        spec = Composite(obs=Unbounded(shape=(3, 2)), nested=Composite(x=Unbounded(shape=(3,))))
        assert spec["nested"].shape == ()
        spec.shape = (3,)
        assert spec.shape == (3,) and spec["nested"].shape == (3,)
        spec.shape = ()  # a shorter batch shape leaves the nested composites as they are
        assert spec["nested"].shape == (3,)

    def test_shape_setter_changes_nothing_when_a_nested_leaf_refuses(self):
        spec = Composite(
            ok=Composite(x=Unbounded(shape=(3,))),
            bad=Composite(y=Unbounded(shape=(2,))),
        )
        with pytest.raises(ValueError, match=r"entry 'y' has shape \(2,\)"):
            spec.shape = (3,)
        assert spec.shape == () and spec["ok"].shape == () and spec["bad"].shape == ()

    def test_shape_setter_refuses_locked_nested_composite(self):
        spec = Composite(nested=Composite(x=Unbounded(shape=(3,))))
        spec["nested"].lock_()
        with pytest.raises(RuntimeError, match="nested entry 'nested'"):
            spec.shape = (3,)
        assert spec.shape == ()

    @pytest.mark.parametrize("shape", [(4,), (2, 3)])
    def test_nested_composite_takes_the_batch_shape(self, shape):
        given = Composite(leaf=Unbounded(shape=shape), deeper=Composite())
        spec = Composite(nested=given, shape=shape)
        assert spec["nested"].shape == shape and spec["nested", "deeper"].shape == shape
        assert given.shape == () and given["deeper"].shape == ()  # the given spec is untouched
        built = Composite(shape=shape)
        built["nested", "leaf"] = Unbounded(shape=shape)
        built["nested", "deeper"] = Composite()
        assert built == spec
        assert spec.rand()["nested", "deeper"].batch_size == shape

    def test_non_tensor_takes_the_batch_shape(self):
        spec = Composite(text=NonTensor(shape=(), example_data="hi"), shape=(2,))
        assert spec["text"].shape == (2,) and spec["text"].rand().batch_size == (2,)

    def test_leaf_of_a_prefix_shape_is_refused(self):
        with pytest.raises(ValueError, match="starting with it"):
            Composite(a=Unbounded(shape=()), shape=(2,))

    def test_device_setter_moves_entries(self):
        spec = Composite(a=Unbounded(shape=(1,)))
        spec.device = "cpu"
        assert spec.device == spec["a"].device == torch.device("cpu")

    def test_dynamic(self):
        spec = Composite(observation=Unbounded(shape=(3, -1, 2)))
        assert spec["observation"].is_dynamic and spec.is_dynamic
        assert Composite(a=Composite(b=spec)).is_dynamic and not make_spec().is_dynamic
        assert spec.rand()["observation"].shape == (3, 1, 2)  # a dynamic dim is drawn at 1
        dynamic_batch = Composite(a=Unbounded(shape=(-1, 2)), shape=(-1,))
        assert dynamic_batch.rand().batch_size == (1,) and dynamic_batch.zero()["a"].shape == (1, 2)
        assert dynamic_batch.rand((3,))["a"].shape == (3, 1, 2)
        with pytest.raises(ValueError, match="dynamic dim"):
            dynamic_batch.unbind(0)
        assert dynamic_batch.expand(3, -1).shape == (3, -1)

    def test_to_clone_eq(self):
        spec = make_spec()
        assert spec.clone() == spec and spec.clone() is not spec
        assert spec.clone()["obs"] is not spec["obs"]
        moved = spec.to("cpu")
        assert moved.device == torch.device("cpu") and moved["next", "reward"].device.type == "cpu"
        assert moved.to("cpu") is moved
        assert spec.to(torch.float64)["obs"].dtype is torch.float64
        other = make_spec()
        other["obs"] = Unbounded(shape=(4, 5))
        assert other != spec and spec != spec["obs"]

    def test_clear_device(self):
        spec = Composite(a=Composite(b=Unbounded()), device="cpu").clear_device_()
        assert spec.device is None and spec["a"].device is None
        assert spec["a", "b"].device == torch.device("cpu")

    def test_cardinality(self):
        spec = Composite(a=Categorical(3), b=Composite(c=OneHot(4)), d=None)
        assert spec.cardinality() == 12
        with pytest.raises(TypeError, match="no finite cardinality"):
            make_spec().cardinality()

    def test_contains_is_is_in(self):
        spec = make_spec()
        data = spec.rand()
        assert spec.contains(data)
        data["action"] += 5
        assert not spec.contains(data)

    def test_pickle_keeps_lock(self):
        spec = make_spec().lock_()
        restored = pickle.loads(pickle.dumps(spec))
        assert restored == spec and restored.is_locked

    def test_repr_lists_entries(self):
        text = repr(make_spec())
        assert "reward:" in text and "shape=torch.Size([4])" in text

    def test_seed_done_spec_example(self):
        full_done_spec = Composite(
            done=Binary(1, shape=(1,), dtype=torch.bool),
            terminated=Binary(1, shape=(1,), dtype=torch.bool),
            truncated=Binary(1, shape=(1,), dtype=torch.bool),
        )
        done = full_done_spec.zero() | True
        assert done["truncated"].tolist() == [True]

    def test_one_hot_in_composite(self):
        spec = Composite(action=OneHot(3, shape=(2, 3)), shape=(2,))
        assert spec.is_in(spec.rand())


class TestCompositeDtype:
    """A composite's dtype is the one its leaves share, read from them when asked."""

    def test_shared_leaf_dtype_nested_or_not(self):
        spec = Composite(a=Unbounded(2), sub=Composite(b=Unbounded(3)))
        assert spec.dtype == torch.float32
        spec["sub", "c"] = Unbounded(1, dtype=torch.int64)  # follows later edits
        assert spec.dtype is None

    def test_no_leaf_no_dtype(self):
        assert Composite().dtype is None
        assert Composite(sub=Composite()).dtype is None

    def test_a_cast_composite_reports_the_new_dtype(self):
        spec = Composite(a=Unbounded(2, dtype=torch.float64), b=Unbounded(1, dtype=torch.float64))
        assert spec.dtype == torch.float64
        assert spec.to(torch.float32).dtype == torch.float32
