"""torch.stack on specs, Stacked and StackedComposite."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict

from rl_specs import (
    Binary,
    Bounded,
    Categorical,
    Composite,
    OneHot,
    Stacked,
    StackedComposite,
    Unbounded,
)


def hetero_composites() -> list[Composite]:
    return [
        Composite(obs=Unbounded(shape=(3,)), extra=Unbounded(shape=(1,))),
        Composite(obs=Unbounded(shape=(4,))),
    ]


class TestTorchStack:
    @pytest.mark.parametrize(
        ("dim", "expected"), [(0, (3, 2)), (1, (2, 3)), (-1, (2, 3)), (-2, (3, 2))]
    )
    def test_identical_specs_expand(self, dim, expected):
        spec = Bounded(low=-1, high=1, shape=(2,))
        stacked = torch.stack([spec, spec.clone(), spec.clone()], dim=dim)
        assert type(stacked) is type(spec)
        assert stacked.shape == expected
        assert stacked.is_in(stacked.rand())

    def test_identical_composites_expand(self):
        spec = Composite(a=Unbounded(shape=(2,)))
        stacked = torch.stack([spec, spec.clone()], 0)
        assert type(stacked) is Composite and stacked.shape == (2,)
        assert stacked["a"].shape == (2, 2)

    def test_different_leaves_give_stacked(self):
        stacked = torch.stack([Bounded(-1, 1, shape=(2,)), Bounded(-2, 2, shape=(2,))])
        assert type(stacked) is Stacked and stacked.shape == (2, 2)

    def test_different_composites_give_stacked_composite(self):
        stacked = torch.stack(hetero_composites(), dim=0)
        assert type(stacked) is StackedComposite and isinstance(stacked, Composite)

    @pytest.mark.parametrize(
        ("specs", "match"),
        [
            ([Bounded(-1, 1, shape=(2,)), Unbounded(shape=(2,))], "Found more than one type"),
            ([Composite(a=Unbounded()), Unbounded()], "Found more than one type"),
            (
                [Bounded(-1, 1, shape=(2,), dtype=torch.float64), Bounded(-1, 1, shape=(2,))],
                r"Dtypes differ, got \[torch.float64, torch.float32\]",
            ),
            ([Unbounded(shape=(2,)), Unbounded(shape=(2, 1))], "Ndims differ"),
        ],
    )
    def test_leaves_of_another_class_dtype_or_rank_refused(self, specs, match):
        with pytest.raises(ValueError, match=match) as info:
            torch.stack(specs)
        assert isinstance(info.value, RuntimeError)  # what code written for TorchRL catches

    def test_subclass_members_stack(self):
        stacked = torch.stack([Categorical(2, shape=(4,), dtype=torch.int8), Binary(4)])
        assert type(stacked) is Stacked and stacked.shape == (2, 4)

    def test_stacked_keeps_members_of_different_classes(self):
        stacked = Stacked(Bounded(-1, 1, shape=(1,)), OneHot(2), dim=0)
        assert stacked.shape == (2, -1)
        assert stacked.dtype is None and stacked.domain == "mixed"
        assert isinstance(stacked[0], Bounded) and isinstance(stacked[1], OneHot)
        with pytest.raises(RuntimeError, match=r"dtypes \['torch.float32', 'torch.bool'\]"):
            stacked.rand()
        same = Stacked(Bounded(-1, 1, shape=(2,)), Unbounded(shape=(2,)), dim=0)
        assert same.dtype == torch.float32 and same.rand().shape == (2, 2)

    def test_composite_without_device_stacks_with_any_device(self):
        anywhere, on_cpu = Composite(a=Unbounded()), Composite(b=Unbounded(), device="cpu")
        stacked = torch.stack([anywhere, on_cpu])
        assert type(stacked) is StackedComposite and stacked.device == torch.device("cpu")
        assert stacked[0] is anywhere and stacked[1] is on_cpu

    def test_stacked_composite_of_different_envs_lists_its_leaves(self):
        pool = torch.stack(
            [Composite(action=Bounded(-1, 1, shape=(1,))), Composite(action=OneHot(2))]
        )
        assert list(pool.keys(True, True)) == ["action"]
        assert type(pool["action"]) is Stacked
        sample = pool.rand()
        assert (
            sample[0]["action"].dtype == torch.float32 and sample[1]["action"].dtype == torch.bool
        )
        assert pool.is_in(sample)

    def test_rank_mismatch_raises(self):
        with pytest.raises(ValueError, match="same number of dims"):
            torch.stack([Unbounded(shape=(2,)), Unbounded(shape=(2, 1))])

    def test_device_mismatch_raises(self):
        with pytest.raises(ValueError, match="one device"):
            torch.stack([Unbounded(shape=(2,), device="cpu"), Unbounded(shape=(2,), device="meta")])

    def test_empty_raises(self):
        with pytest.raises(ValueError, match="at least one spec"):
            Stacked(dim=0)

    def test_dim_out_of_range(self):
        with pytest.raises(IndexError, match="expected dim"):
            torch.stack([Unbounded(shape=(2,)), Unbounded(shape=(3,))], dim=3)

    def test_non_spec_member(self):
        with pytest.raises(TypeError, match="TensorSpec members"):
            Stacked(Unbounded(), "x", dim=0)


class TestStacked:
    def test_shape_marks_differing_dims(self):
        stacked = torch.stack([Unbounded(shape=(2, 5)), Unbounded(shape=(3, 5))], dim=1)
        assert stacked.shape == (-1, 2, 5) and stacked.is_dynamic and stacked.dim == 1

    def test_generation_dense(self):
        stacked = torch.stack([Bounded(-1, 1, shape=(3,)), Bounded(5, 6, shape=(3,))], dim=0)
        sample = stacked.rand((4,))
        assert sample.shape == (4, 2, 3) and stacked.is_in(sample)
        assert bool((sample[:, 1] >= 5).all())
        assert stacked.zero().shape == (2, 3) and bool((stacked.one() == 1).all())
        assert not stacked.is_in(torch.full((2, 3), 5.5))

    def test_generation_ragged_gives_nested(self):
        stacked = torch.stack([Unbounded(shape=(2,)), Unbounded(shape=(5,))])
        sample = stacked.rand()
        assert sample.is_nested and stacked.is_in(sample)
        with pytest.raises(RuntimeError, match="nested tensor along dim 0"):
            stacked.rand((3,))

    def test_project(self):
        stacked = torch.stack([Bounded(-1, 1, shape=(2,)), Bounded(5, 6, shape=(2,))])
        out = stacked.project(torch.zeros(2, 2))
        assert out.tolist() == [[0.0, 0.0], [5.0, 5.0]]

    def test_encode(self):
        stacked = torch.stack([Bounded(-1, 1, shape=(2,)), Bounded(5, 6, shape=(2,))])
        assert stacked.encode([[0.5, 0.5], [5.5, 5.5]]).shape == (2, 2)

    def test_indexing(self):
        a, b = Bounded(-1, 1, shape=(3,)), Bounded(5, 6, shape=(3,))
        stacked = torch.stack([a, b])
        assert stacked[1] == b and stacked[0, 1:].shape == (2,)
        assert stacked[:1] == a.unsqueeze(0)
        assert stacked[:, 0].shape == (2,) and type(stacked[:, 0]) is Stacked
        assert stacked[torch.tensor([1, 0])][0] == b
        later = torch.stack([a.expand(2, 3), b.expand(2, 3)], dim=1)
        assert later[1, 0] == a and later[0].shape == (2, 3)
        with pytest.raises(IndexError, match="insert dims"):
            stacked[None]

    def test_unbind(self):
        a, b = Bounded(-1, 1, shape=(3,)), Bounded(5, 6, shape=(3,))
        stacked = torch.stack([a, b])
        assert stacked.unbind(0) == (a, b)
        columns = stacked.unbind(1)
        assert len(columns) == 3 and columns[0].shape == (2,)

    def test_expand_squeeze_unsqueeze(self):
        stacked = torch.stack([Bounded(-1, 1, shape=(3,)), Bounded(5, 6, shape=(3,))])
        expanded = stacked.expand(4, 2, 3)
        assert expanded.shape == (4, 2, 3) and expanded.dim == 1
        with pytest.raises(ValueError, match="Prepend the new dims"):
            stacked.expand(4, 5, 3)
        assert stacked.unsqueeze(0).shape == (1, 2, 3) and stacked.unsqueeze(0).dim == 1
        assert stacked.unsqueeze(-1).shape == (2, 3, 1) and stacked.unsqueeze(-1).dim == 0
        assert stacked.unsqueeze(0).squeeze(0) == stacked
        assert stacked.unsqueeze(-1).squeeze() == stacked
        assert stacked.squeeze(0) == stacked
        single = torch.stack([Bounded(-1, 1, shape=(3,))] * 1)
        assert single.shape == (1, 3)

    def test_reshape(self):
        same = Stacked(Unbounded(shape=(3,)), Unbounded(shape=(3,)), dim=0)
        assert same.reshape(6).shape == (6,) and same.flatten().shape == (6,)
        different = torch.stack([Bounded(-1, 1, shape=(3,)), Bounded(5, 6, shape=(3,))])
        with pytest.raises(ValueError, match="identical members"):
            different.reshape(6)

    def test_to_clone_eq(self):
        stacked = torch.stack([Bounded(-1, 1, shape=(3,)), Bounded(5, 6, shape=(3,))])
        assert stacked.clone() == stacked and stacked.to("cpu").device.type == "cpu"
        assert stacked.to(torch.float64).dtype is torch.float64
        assert stacked != stacked.unsqueeze(0)

    def test_assert_is_in_names_member(self):
        stacked = torch.stack([Bounded(-1, 1, shape=(3,)), Bounded(5, 6, shape=(3,))])
        with pytest.raises(ValueError, match="Stack member 1"):
            stacked.assert_is_in(torch.zeros(2, 3))

    def test_to_numpy_dense_or_per_member(self):
        dense = torch.stack([Bounded(-1, 1, shape=(3,)), Bounded(5, 6, shape=(3,))])
        sample = dense.rand()
        assert np.array_equal(dense.to_numpy(sample), sample.numpy())
        ragged = torch.stack([Unbounded(shape=(2,)), Unbounded(shape=(5,))])
        parts = ragged.to_numpy(ragged.rand())
        assert [p.shape for p in parts] == [(2,), (5,)]
        with pytest.raises(AssertionError, match="Stack member 1"):
            dense.to_numpy(torch.zeros(2, 3), safe=True)

    def test_marl_example(self):
        """The multi-agent example of the seeds: per-agent specs under "agents"."""
        n_agents = 3
        action_specs = [Bounded(-1, 1, shape=(2,)) for _ in range(n_agents)]
        observation_specs = [Unbounded(shape=(i + 2,)) for i in range(n_agents)]
        action_spec = Composite(
            {"agents": Composite({"action": torch.stack(action_specs)}, shape=(n_agents,))}
        )
        observation_spec = Composite(
            {
                "agents": Composite(
                    {"observation": torch.stack(observation_specs)}, shape=(n_agents,)
                )
            }
        )
        assert action_spec["agents", "action"].shape == (3, 2)
        assert action_spec.is_in(action_spec.rand())
        assert observation_spec["agents", "observation"].shape == (3, -1)
        sample = observation_spec["agents", "observation"].rand()
        assert sample.is_nested
        done_spec = Categorical(n=2, shape=torch.Size((1,)), dtype=torch.bool)
        assert done_spec.is_in(done_spec.rand())


class TestStackedComposite:
    def test_shape_and_keys(self):
        stacked = torch.stack(hetero_composites())
        assert stacked.shape == (2,) and stacked.device is None and stacked.is_dynamic
        assert not torch.stack([Composite(a=Unbounded()), Composite(a=Unbounded())]).is_dynamic
        assert list(stacked.keys()) == ["obs"]
        assert list(stacked) == ["obs"]
        assert stacked.exclusive_keys() == {"extra"}
        assert "obs" in stacked and "extra" not in stacked

    def test_getitem(self):
        stacked = torch.stack(hetero_composites())
        assert stacked["obs"].shape == (2, -1) and type(stacked["obs"]) is Stacked
        with pytest.raises(KeyError, match="exclusive key"):
            stacked["extra"]
        assert stacked[1] == hetero_composites()[1]
        assert type(stacked[:1]) is Composite

    def test_nested_keys_in_parent(self):
        parent = Composite(agents=torch.stack(hetero_composites()))
        assert list(parent.keys(True, True)) == [("agents", "obs")]
        assert parent["agents", "obs"].shape == (2, -1)
        assert ("agents", "obs") in parent

    def test_generation_is_lazy_stack_with_exclusive_keys(self):
        stacked = torch.stack(hetero_composites())
        data = stacked.rand()
        assert isinstance(data, LazyStackedTensorDict) and data.batch_size == (2,)
        assert data[0]["extra"].shape == (1,)
        assert stacked.is_in(data)
        assert stacked.zero((3,)).batch_size == (3, 2)
        assert stacked.one().tensordicts[1]["obs"].tolist() == [1.0] * 4
        dense = TensorDict(obs=torch.zeros(2, 3), batch_size=[2])
        with pytest.raises(KeyError, match="expected key 'extra'"):
            stacked.is_in(dense)
        assert not stacked.is_in(TensorDict(batch_size=[3]))

    def test_project_and_encode(self):
        stacked = torch.stack(
            [Composite(a=Bounded(0, 1, shape=(2,))), Composite(a=Bounded(5, 6, shape=(2,)))]
        )
        projected = stacked.project(TensorDict(a=torch.zeros(2, 2), batch_size=[2]))
        assert projected[1]["a"].tolist() == [5.0, 5.0]
        encoded = stacked.encode({"a": [[0.5, 0.5], [5.5, 5.5]]})
        assert stacked.is_in(encoded)

    def test_setitem_and_delitem(self):
        stacked = torch.stack(hetero_composites())
        stacked["act"] = torch.stack([Bounded(-1, 1, shape=(1,)), Bounded(-2, 2, shape=(1,))])
        assert stacked[1]["act"].high.tolist() == [2.0]
        stacked["shared"] = Unbounded(shape=(2, 5))
        assert stacked["shared"].shape == (2, 5)
        del stacked["extra"]
        assert stacked.exclusive_keys() == set()
        with pytest.raises(ValueError, match="one spec per member"):
            stacked["bad"] = Unbounded(shape=(3, 1))

    def test_len_is_the_size_of_the_first_dim(self):
        stacked = torch.stack(hetero_composites())
        assert len(stacked) == 2 == len(stacked.rand())
        assert len(stacked.expand(3, 2)) == 3

    def test_delitem_reaches_exclusive_and_nested_keys(self):
        stacked = torch.stack(
            [
                Composite(a=Composite(x=Unbounded(shape=(1,))), b=Unbounded()),
                Composite(b=Unbounded()),
            ]
        )
        del stacked["a", "x"]
        assert "x" not in stacked[0]["a"]
        with pytest.raises(KeyError, match=r"No member of the StackedComposite has key 'x'"):
            del stacked["x"]
        del stacked["b"]
        assert list(stacked[1].keys()) == []

    def test_to_numpy_gives_a_dict_of_shared_keys(self):
        stacked = torch.stack(
            [
                Composite(a=Bounded(-1, 1, shape=(3,))),
                Composite(a=Bounded(-1, 1, shape=(3,)), b=Unbounded()),
            ]
        )
        data = stacked.rand()
        arrays = stacked.to_numpy(data)
        assert list(arrays) == ["a"] and np.array_equal(arrays["a"], data["a"].numpy())
        with pytest.raises(AssertionError, match="Stack member 0"):
            stacked.to_numpy(TensorDict(a=torch.full((2, 3), 2.0), batch_size=[2]), safe=True)

    def test_type_check(self):
        stacked = torch.stack(hetero_composites())
        data = stacked.rand()
        stacked.type_check(data)
        stacked.type_check(data.get("obs", as_nested_tensor=True), "obs")
        data[1]["obs"] = data[1]["obs"].double()
        with pytest.raises(TypeError, match=r"at key 'obs' expected dtype torch\.float32"):
            stacked.type_check(data)
        with pytest.raises(TypeError, match="at key 'obs'"):
            stacked.type_check(torch.zeros(2, 3, dtype=torch.int64), "obs")

    def test_lock(self):
        stacked = torch.stack(hetero_composites()).lock_()
        assert stacked.is_locked and stacked[0].is_locked
        with pytest.raises(RuntimeError, match="locked"):
            stacked["x"] = Unbounded(shape=(2, 1))
        stacked.unlock_()
        assert not stacked[1].is_locked

    def test_shape_ops(self):
        stacked = torch.stack(hetero_composites())
        assert stacked.unbind(0)[0] == hetero_composites()[0]
        assert stacked.expand(3, 2).shape == (3, 2) and stacked.expand(3, 2).dim == 1
        assert stacked.unsqueeze(0).shape == (1, 2)
        assert stacked.unsqueeze(0).squeeze(0) == stacked
        with pytest.raises(ValueError, match="identical members"):
            stacked.reshape(2, 1)

    def test_empty_exclude_clone_to(self):
        stacked = torch.stack(hetero_composites())
        assert stacked.empty().is_empty() and not stacked.is_empty()
        assert stacked.exclude("extra").exclusive_keys() == set()
        assert stacked.clone() == stacked
        assert stacked.to("cpu")[0].device == torch.device("cpu")
        assert "StackedComposite(" in repr(stacked)

    def test_pickle(self):
        stacked = torch.stack(hetero_composites())
        assert pickle.loads(pickle.dumps(stacked)) == stacked
        leaves = torch.stack([Unbounded(shape=(2,)), Unbounded(shape=(3,))])
        assert pickle.loads(pickle.dumps(leaves)) == leaves

    def test_assert_is_in(self):
        stacked = torch.stack(hetero_composites())
        data = stacked.rand()
        data.tensordicts[1]["obs"] = torch.zeros(4, dtype=torch.int64)
        with pytest.raises(TypeError, match="Stack member 1"):
            stacked.assert_is_in(data)
