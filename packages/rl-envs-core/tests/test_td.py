"""The plain-TensorDict fast paths give what the generic tensordict methods give."""

from __future__ import annotations

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict

from rl_envs_core import step_mdp
from rl_envs_core._td import to_device
from rl_envs_core.extension import (
    any_true,
    complete_done,
    entries,
    get_entry,
    set_child,
    set_entry,
)
from rl_envs_core.testing import CountingEnv


def _ted(batch=(2,)):
    return TensorDict(
        {
            "obs": torch.zeros(*batch, 1),
            "action": torch.ones(*batch, 1),
            "hidden": torch.full((*batch, 1), 7.0),
            ("agents", "obs"): torch.zeros(*batch, 1),
            ("agents", "action"): torch.ones(*batch, 1),
            "next": {
                "obs": torch.ones(*batch, 1),
                "reward": torch.ones(*batch, 1),
                "done": torch.zeros(*batch, 1, dtype=torch.bool),
                ("agents", "obs"): torch.ones(*batch, 1),
                ("agents", "reward"): torch.ones(*batch, 1),
            },
        },
        batch,
    )


def _as_lazy(td):
    return LazyStackedTensorDict.lazy_stack(list(td.unbind(0)), 0)


class TestReads:
    def test_entries_of_a_tensordict_is_its_dict(self):
        td = _ted()
        assert entries(td) is td._tensordict

    def test_entries_of_a_lazy_stack_match_items(self):
        lazy = _as_lazy(_ted())
        assert sorted(entries(lazy)) == sorted(lazy.keys())

    def test_entries_of_a_list_is_entries_of_each(self):
        from rl_envs_core._td import entries_of

        plain, lazy = _ted(), _as_lazy(_ted())
        got = entries_of([plain, lazy, plain])
        assert got[0] is plain._tensordict and got[2] is plain._tensordict
        assert sorted(got[1]) == sorted(entries(lazy))
        assert entries_of([]) == []

    @pytest.mark.parametrize("key", ["obs", ("agents", "obs"), ("next", "reward"), "missing"])
    @pytest.mark.parametrize("lazy", [False, True])
    def test_get_entry_matches_get(self, key, lazy):
        td = _as_lazy(_ted()) if lazy else _ted()
        expected = td.get(key, None)
        got = get_entry(td, key)
        assert (got is None) == (expected is None)
        if expected is not None:
            assert torch.equal(got, expected)

    @pytest.mark.parametrize(
        "value",
        [
            torch.tensor([False]),
            torch.tensor([True]),
            torch.zeros(()),
            torch.tensor([[False], [True]]),
            torch.zeros(3, 1, dtype=torch.bool),
            torch.tensor([float("nan")]),
        ],
    )
    def test_any_true_matches_any(self, value):
        assert any_true(value) == bool(value.any())


class TestSetEntry:
    @pytest.mark.parametrize("key", ["obs", ("agents", "new"), "new"])
    @pytest.mark.parametrize("lazy", [False, True])
    def test_matches_set(self, key, lazy):
        fast, generic = (_as_lazy(_ted()) if lazy else _ted() for _ in range(2))
        value = torch.full((2, 1), 3.0)
        set_entry(fast, key, value)
        generic.set(key, value)
        assert torch.equal(fast.get(key), generic.get(key))
        assert set(fast.keys(True, True)) == set(generic.keys(True, True))

    def test_wrong_shape_raises_like_set(self):
        with pytest.raises(RuntimeError):
            _ted().set("obs", torch.zeros(3, 1))
        with pytest.raises(RuntimeError):
            set_entry(_ted(), "obs", torch.zeros(3, 1))


class TestSetChild:
    def test_fast_path_stores_the_child(self):
        root, child = _ted(), TensorDict({"x": torch.ones(2, 1)}, [2])
        set_child(root, "next", child)
        assert root.get("next") is child

    def test_names_are_propagated_like_set(self):
        root = _ted()
        root.names = ["env"]
        child = TensorDict({"x": torch.ones(2, 1)}, [2])
        set_child(root, "next", child)
        assert root.get("next").names == ["env"]

    def test_longer_child_batch_is_fitted_like_set(self):
        root, child = _ted(), TensorDict({"x": torch.ones(2, 3)}, [2, 3])
        expected = _ted()
        expected.set("next", child.clone())
        set_child(root, "next", child)
        assert root.get("next").batch_size == expected.get("next").batch_size

    @pytest.mark.parametrize("child_batch", [[3], []])
    def test_other_batch_sizes_behave_like_set(self, child_batch):
        def attempt(setter):
            root = _ted()
            try:
                setter(root, "next", TensorDict({"x": torch.zeros(*child_batch, 1)}, child_batch))
            except RuntimeError:
                return "raised"
            return root.get("next").batch_size

        assert attempt(set_child) == attempt(lambda td, key, value: td.set(key, value))

    def test_locked_parent_raises(self):
        root = _ted().lock_()
        with pytest.raises(RuntimeError):
            set_child(root, "next", TensorDict({}, [2]))

    def test_lazy_parent_goes_through_set(self):
        lazy = _as_lazy(_ted())
        set_child(lazy, "next", TensorDict({"x": torch.ones(2, 1)}, [2]))
        assert torch.equal(lazy.get(("next", "x")), torch.ones(2, 1))


class TestStepMdpPaths:
    @pytest.mark.parametrize("keep_other", [True, False])
    @pytest.mark.parametrize("exclude_done", [True, False])
    def test_plain_and_lazy_inputs_agree(self, keep_other, exclude_done):
        kwargs = {
            "keep_other": keep_other,
            "exclude_done": exclude_done,
            "reward_keys": ["reward", ("agents", "reward")],
            "action_keys": ["action", ("agents", "action")],
        }
        fast = step_mdp(_ted(), **kwargs)
        generic = step_mdp(_as_lazy(_ted()), **kwargs)
        assert set(fast.keys(True, True)) == set(generic.keys(True, True))
        for key in fast.keys(True, True):
            assert torch.equal(fast.get(key), generic.get(key))

    def test_env_step_mdp_on_lazy_steps(self):
        env = CountingEnv(batch_size=[2])
        data = env.rand_step(env.reset())
        fast = env._step_mdp(data)
        generic = env._step_mdp(_as_lazy(data))
        assert set(fast.keys(True, True)) == set(generic.keys(True, True))
        for key in fast.keys(True, True):
            assert torch.equal(fast.get(key), generic.get(key))


class TestCompleteDone:
    def _output(self, **flags):
        return TensorDict({"observation": torch.zeros(1), **flags}, [])

    def test_all_present_is_left_alone(self):
        env = CountingEnv()
        out = self._output(
            done=torch.tensor([True]),
            terminated=torch.tensor([False]),
            truncated=torch.tensor([True]),
        )
        before = dict(out.items())
        complete_done(env, out, fill_zeros=True)
        assert all(out.get(key) is value for key, value in before.items())

    @pytest.mark.parametrize("lazy", [False, True])
    def test_missing_dual_is_filled(self, lazy):
        env = CountingEnv().add_truncated_keys()
        out = self._output(done=torch.tensor([True]))
        if lazy:
            out = LazyStackedTensorDict.lazy_stack([out], 0)[0]
        complete_done(env, out, fill_zeros=True)
        assert out.get("terminated").item() and not out.get("truncated").item()


class TestStepPathHelpers:
    def test_has_entries_only_vouches_for_a_plain_tensordict_holding_all(self):
        from rl_envs_core._td import has_entries

        names = frozenset({"done", "terminated"})
        flags = {"done": torch.zeros(1, dtype=torch.bool), "terminated": torch.ones(1)}
        assert has_entries(TensorDict(flags, []), names)
        assert not has_entries(TensorDict({"done": flags["done"]}, []), names)
        lazy = LazyStackedTensorDict.lazy_stack([TensorDict(flags, [])], 0)
        assert not has_entries(lazy, names)  # another type: the caller's general path
        assert has_entries(TensorDict({}, []), frozenset())

    def test_unchecked_constructor_builds_what_the_public_one_builds(self):
        from rl_envs_core._td import new_unchecked

        source = {"a": torch.zeros(3, 1), "b": torch.ones(3)}
        built = new_unchecked(source, torch.Size([3]), None, nested=False)
        expected = TensorDict(source, batch_size=[3])
        assert built.batch_size == expected.batch_size and built.device is None
        assert (built == expected).all()

    def test_new_unchecked_keeps_its_documented_signature_and_docstring(self):
        import inspect

        from rl_envs_core._td import new_unchecked

        params = list(inspect.signature(new_unchecked).parameters)
        assert params == ["source", "batch_size", "device", "nested"]
        assert "without re-checking each entry" in new_unchecked.__doc__
        built = new_unchecked({"a": {"b": torch.zeros(2)}}, torch.Size([2]))  # nested dicts
        assert built["a", "b"].shape == (2,) and built.batch_size == (2,)

    def test_step_completes_a_lone_done_flag(self):
        class LoneDone(CountingEnv):
            def _step(self, tensordict):
                return super()._step(tensordict).exclude("terminated", "truncated")

        env = LoneDone().add_truncated_keys()
        nxt = env.step(env.rand_action(env.reset()))["next"]
        assert {"done", "terminated", "truncated"} <= set(nxt.keys())
        assert nxt["terminated"].dtype == torch.bool and not nxt["truncated"].any()


class TestToDevice:
    """to_device gives what TensorDict.to gives, sharing the tensors when none moves."""

    def test_flat_output_without_device_is_labelled(self):
        td = TensorDict({"a": torch.zeros(2, 1), "b": torch.ones(2, dtype=torch.bool)}, [2])
        out = to_device(td, torch.device("cpu"))
        ref = td.to("cpu")
        assert out is not td and td.device is None
        assert out.device == ref.device and out.batch_size == ref.batch_size
        assert all(out[key] is td[key] for key in ("a", "b"))

    def test_nested_and_named_take_the_generic_cast(self):
        nested = TensorDict({"a": {"b": torch.zeros(2)}}, [2])
        out = to_device(nested, torch.device("cpu"))
        assert out.device == torch.device("cpu") and out["a"].device == torch.device("cpu")
        named = TensorDict({"a": torch.zeros(2)}, [2], names=["time"])
        assert to_device(named, torch.device("cpu")).names == ["time"]

    def test_env_step_output_carries_the_env_device(self):
        env = CountingEnv(device="cpu")
        data = env.step(env.rand_action(env.reset()))
        assert data["next"].device == torch.device("cpu")
