"""Partial steps ("_step") and partial resets ("_reset"), including every example of the
"Partial steps and partial resets" section of the envs documentation."""

from __future__ import annotations

import pytest
import torch
from tensordict import LazyStackedTensorDict, NonTensorData, NonTensorStack, TensorDict

from rl_envs_core import EnvBase
from rl_envs_core._partial import merge_masked
from rl_envs_core.testing import CountingEnv
from rl_specs import Categorical, Composite, NonTensor, Unbounded


def _done(shape):
    return Categorical(2, shape=shape, dtype=torch.bool)


class ZeroResetEnv(EnvBase):
    """Returns zeros after reset and ``val + 1`` after a step, at every done level."""

    def __init__(self, levels=((),), width=2):
        super().__init__()
        self.levels = [tuple(level) for level in levels]
        self.width = width
        obs, done = Composite(), Composite()
        for level in self.levels:
            obs[(*level, "val")] = Unbounded(shape=(width,), dtype=torch.int64)
            done[(*level, "done")] = _done((width,))
        self.observation_spec = obs
        self.full_done_spec = done
        self.full_reward_spec = Composite()
        self.action_spec = Unbounded(shape=(width,), dtype=torch.int64)

    def _reset(self, tensordict=None, **kwargs):
        out = TensorDict()
        for level in self.levels:
            out[(*level, "val")] = torch.zeros(self.width, dtype=torch.int64)
            out[(*level, "done")] = torch.zeros(self.width, dtype=torch.bool)
        return out

    def _step(self, tensordict):
        out = TensorDict()
        for level in self.levels:
            out[(*level, "val")] = tensordict[(*level, "val")] + 1
            out[(*level, "done")] = torch.zeros(self.width, dtype=torch.bool)
        return out

    def _set_seed(self, seed):
        pass


class StatelessAddEnv(EnvBase):
    """A batch-unlocked env: x <- x + 1 where stepped; done when x >= 3."""

    batch_locked = False

    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(x=Unbounded(shape=(1,)))
        self.action_spec = Unbounded(shape=(1,))
        self.calls = []

    def _reset(self, tensordict=None, **kwargs):
        shape = tensordict.batch_size if tensordict is not None else torch.Size([])
        return TensorDict({"x": torch.zeros(*shape, 1)}, batch_size=shape)

    def _step(self, tensordict):
        self.calls.append(tensordict.batch_size)
        x = tensordict["x"] + 1
        done = x >= 3
        return TensorDict(
            {"x": x, "reward": torch.ones_like(x), "done": done, "terminated": done.clone()},
            batch_size=tensordict.batch_size,
        )

    def _set_seed(self, seed):
        pass


class TestPartialReset:
    def test_single_reset_at_the_root(self):
        env = ZeroResetEnv()
        data = TensorDict({"val": [1, 1], "_reset": [False, True]}, [])
        env.reset(data)
        assert data.get("val").tolist() == [1, 0]

    def test_nested_resets(self):
        env = ZeroResetEnv(levels=(("agent0",), ("agent1",)))
        data = TensorDict({
            ("agent0", "val"): [1, 1], ("agent0", "_reset"): [False, True],
            ("agent1", "val"): [2, 2], ("agent1", "_reset"): [True, False],
        }, [])
        env.reset(data)
        assert data.get(("agent0", "val")).tolist() == [1, 0]
        assert data.get(("agent1", "val")).tolist() == [0, 2]

    def test_root_reset_overrides_nested_resets(self):
        env = ZeroResetEnv(levels=(("agent0",), ("agent1",)))
        data = TensorDict({
            "_reset": [True, True],
            ("agent0", "val"): [1, 1], ("agent0", "_reset"): [False, True],
            ("agent1", "val"): [2, 2], ("agent1", "_reset"): [True, False],
        }, [])
        env.reset(data)
        assert data.get(("agent0", "val")).tolist() == [0, 0]
        assert data.get(("agent1", "val")).tolist() == [0, 0]

    def test_batched_reset_eliminates_reset_entry(self):
        env = CountingEnv(batch_size=[4])
        data = env.rollout(2, break_when_any_done=False)[..., -1]["next"].clone()
        data["_reset"] = torch.tensor([[True], [False], [True], [True]])
        out = env.reset(data)
        assert set(out.keys()) == {"terminated", "done", "observation"}
        assert out.batch_size == torch.Size([4])
        assert out["observation"].squeeze(-1).tolist() == [0.0, 2.0, 0.0, 0.0]
        assert "_reset" not in data.keys()
        assert env.count.squeeze(-1).tolist() == [0, 2, 0, 0]

    def test_all_true_reset_mask_gives_the_fresh_values(self):
        env = CountingEnv(batch_size=[3])
        data = env.rollout(2, break_when_any_done=False)[..., -1]["next"].clone()
        data["_reset"] = torch.ones(3, 1, dtype=torch.bool)
        out = env.reset(data)
        assert out["observation"].squeeze(-1).tolist() == [0.0, 0.0, 0.0]
        assert data["observation"].squeeze(-1).tolist() == [0.0, 0.0, 0.0]
        assert "_reset" not in data.keys() and "_reset" not in out.keys()

    def test_all_true_mask_that_does_not_fit_raises(self):
        env = ZeroResetEnv()
        data = TensorDict({"val": [1, 1], "_reset": [True, True, True]}, [])
        with pytest.raises(ValueError, match=r"mask of shape \(3,\) cannot be aligned"):
            env.reset(data)

    def test_reset_entries_are_removed_from_the_outputs(self):
        env = ZeroResetEnv(levels=(("agent0",), ("agent1",)))
        data = TensorDict({
            "_reset": [True, False],
            ("agent0", "val"): [1, 1], ("agent0", "_reset"): [False, True],
            ("agent1", "val"): [2, 2],
        }, [])
        out = env.reset(data)
        assert not any("_reset" in str(k) for k in out.keys(True, True))
        assert not any("_reset" in str(k) for k in data.keys(True, True))

    def test_reset_without_mask_resets_everything(self):
        env = ZeroResetEnv()
        out = env.reset(TensorDict({"val": [5, 5]}, []))
        assert out["val"].tolist() == [0, 0]

    def test_mask_that_does_not_fit_raises(self):
        env = ZeroResetEnv()
        data = TensorDict({"val": [1, 1], "_reset": [False, True, True]}, [])
        with pytest.raises(ValueError, match=r"mask of shape \(3,\) cannot be aligned"):
            env.reset(data)

    def test_done_after_reset_raises_unless_allowed(self):
        class AlwaysDone(CountingEnv):
            def _reset(self, tensordict=None, **kwargs):
                out = super()._reset(tensordict)
                out["done"] = torch.ones_like(out["done"])
                return out

        with pytest.raises(RuntimeError, match="allow_done_after_reset=True"):
            AlwaysDone().reset()
        assert AlwaysDone(allow_done_after_reset=True).reset()["done"].all()

    def test_done_copied_from_a_true_terminated_after_reset_raises(self):
        # "done" is missing and filled from "terminated": a copy of a True flag, not a
        # zero fill, so the after-reset check must still see it
        class TerminatedOnly(CountingEnv):
            def _reset(self, tensordict=None, **kwargs):
                out = super()._reset(tensordict)
                out["terminated"] = torch.ones_like(out["terminated"])
                del out["done"]
                return out

        with pytest.raises(RuntimeError, match="returned done=True at 'done'"):
            TerminatedOnly().reset()

    def test_zero_filled_done_flags_pass_the_after_reset_check(self):
        class ObservationOnly(CountingEnv):
            def _reset(self, tensordict=None, **kwargs):
                return super()._reset(tensordict).select("observation")

        env = ObservationOnly(batch_size=[2])
        data = env.reset()
        assert not data["done"].any() and not data["terminated"].any()
        data["done"] = torch.tensor([[True], [False]])
        data["terminated"] = data["done"].clone()
        out = env.reset(data.set("_reset", data["done"].clone()))
        assert not out["done"].any() and not data["done"].any()


class TestPartialStep:
    def test_unbatched_env_skips_step_when_mask_is_false(self):
        env = CountingEnv()
        data = env.rand_action(env.reset())
        data["_step"] = torch.tensor(False)
        out = env.step(data)
        assert env.count.item() == 0
        assert out["next", "observation"].item() == 0.0
        assert out["next", "reward"].item() == 0.0

    def test_unbatched_env_steps_when_mask_is_true(self):
        env = CountingEnv()
        data = env.rand_action(env.reset())
        data["_step"] = torch.tensor(True)
        assert env.step(data)["next", "observation"].item() == 1.0

    def test_batch_locked_env_masks_with_previous_values(self):
        env = CountingEnv(batch_size=[3])
        data = env.rand_action(env.reset())
        data["observation"] = torch.tensor([[7.0], [7.0], [7.0]])
        data["_step"] = torch.tensor([True, False, True])
        out = env.step(data)["next"]
        assert out["observation"].squeeze(-1).tolist() == [1.0, 7.0, 1.0]
        assert out["reward"].squeeze(-1).tolist() == [1.0, 0.0, 1.0]

    def test_batch_unlocked_env_steps_only_the_masked_elements(self):
        env = StatelessAddEnv()
        data = env.reset(TensorDict(batch_size=[3]))
        data["x"] = torch.tensor([[0.0], [5.0], [1.0]])
        data["_step"] = torch.tensor([[True], [False], [True]])
        out = env.step(env.rand_action(data))["next"]
        assert env.calls == [torch.Size([2])]
        assert out["x"].squeeze(-1).tolist() == [1.0, 5.0, 2.0]
        assert out["reward"].squeeze(-1).tolist() == [1.0, 0.0, 1.0]

    def test_batch_unlocked_env_with_nothing_to_step(self):
        env = StatelessAddEnv()
        data = TensorDict({"x": torch.ones(2, 1), "_step": torch.tensor([False, False])}, [2])
        out = env.step(env.rand_action(data))["next"]
        assert env.calls == []
        assert out["x"].squeeze(-1).tolist() == [1.0, 1.0]
        assert out["reward"].shape == torch.Size([2, 1]) and not out["reward"].any()

    def test_missing_previous_values_are_zeros(self):
        env = StatelessAddEnv()
        data = TensorDict({"x": torch.ones(2, 1), "_step": torch.tensor([True, False])}, [2])
        out = env.step(env.rand_action(data))["next"]
        assert out["done"].squeeze(-1).tolist() == [False, False]
        assert out["reward"].squeeze(-1).tolist() == [1.0, 0.0]

    def test_wrong_mask_shape_raises(self):
        env = CountingEnv(batch_size=[3])
        data = env.rand_action(env.reset())
        data["_step"] = torch.tensor([[True, True], [False, True], [True, False]])
        with pytest.raises(ValueError, match=r"'_step' mask must have the batch shape \(3,\)"):
            env.step(data)

    @pytest.mark.parametrize("env_fn", [lambda: CountingEnv(max_steps=3, batch_size=[2]),
                                        StatelessAddEnv])
    def test_rollout_break_when_all_done_skips_done_envs(self, env_fn):
        env = env_fn()
        if env.batch_locked:
            env.count = torch.tensor([[1.0], [0.0]])
            start = env.rand_action(env._output(torch.zeros(2, 1, dtype=torch.bool)))
            start["observation"] = env.count.float()
            data = env.rollout(10, auto_reset=False, tensordict=start, break_when_all_done=True)
            obs = data["next", "observation"].squeeze(-1)
            assert obs.tolist() == [[2.0, 3.0, 3.0], [1.0, 2.0, 3.0]]
            assert data["next", "reward"].squeeze(-1).tolist() == [[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]]
        else:
            start = env.reset(TensorDict(batch_size=[2]))
            start["x"] = torch.tensor([[1.0], [0.0]])
            data = env.rollout(10, tensordict=start, auto_reset=False, break_when_all_done=True)
            assert data["next", "x"].squeeze(-1).tolist() == [[2.0, 3.0, 3.0], [1.0, 2.0, 3.0]]
        assert "_step" not in data.keys()


class TestFitMask:
    @pytest.mark.parametrize(
        ("mask_shape", "entry_shape", "expected"),
        [((), (), ()), ((), (3,), (1,)), ((2,), (2, 3), (2, 1)), ((2, 1), (2,), (2,))],
    )
    def test_mask_broadcasts_over_the_entry(self, mask_shape, entry_shape, expected):
        from rl_envs_core._partial import fit_mask

        mask = torch.ones(mask_shape, dtype=torch.bool)
        assert fit_mask(mask, torch.Size(entry_shape), "x").shape == expected

    def test_unbatched_env_partial_reset_after_truncation(self):
        # an unbatched env whose done flag comes back as a 0-dim reset mask
        env = CountingEnv(max_steps=2)
        data = env.rollout(5, break_when_any_done=False)
        assert data["next", "observation"].squeeze(-1).tolist() == [1.0, 2.0, 1.0, 2.0, 1.0]


class TestMergeMasked:
    """One root mask over plain tensordicts takes a direct walk; the rest the generic one."""

    @staticmethod
    def _nested(kind, column):
        if kind == "plain":
            return TensorDict({"b": column}, [3])
        return LazyStackedTensorDict(*[TensorDict({"b": row}, []) for row in column], stack_dim=0)

    @pytest.mark.parametrize("kind", ["plain", "lazy"])
    @pytest.mark.parametrize("zeros_when_missing", [False, True])
    def test_root_mask_result_matches_per_leaf_where(self, kind, zeros_when_missing):
        new = TensorDict(
            {
                "a": torch.ones(3, 2),
                "sub": self._nested(kind, torch.ones(3, 1)),
                "only_new": torch.ones(3),
            },
            [3],
        )
        old = TensorDict({"a": torch.zeros(3, 2), "sub": self._nested(kind, torch.zeros(3, 1))}, [3])
        mask = torch.tensor([True, False, True])
        out = merge_masked(new, old, {(): mask}, zeros_when_missing=zeros_when_missing)
        assert out is new
        assert out["a"].tolist() == [[1, 1], [0, 0], [1, 1]]
        assert out["sub", "b"].squeeze(-1).tolist() == [1, 0, 1]
        # "only_new" has no previous value: zeros where masked out, or kept as computed
        assert out["only_new"].tolist() == ([1, 0, 1] if zeros_when_missing else [1, 1, 1])
        assert old["a"].sum().item() == 0  # the previous values are read, never written

    def test_a_mask_that_does_not_fit_names_the_nested_key(self):
        new = TensorDict({"sub": TensorDict({"b": torch.ones(3, 1)}, [3])}, [3])
        with pytest.raises(ValueError, match=r"\('sub', 'b'\)"):
            merge_masked(new, None, {(): torch.ones(2, dtype=torch.bool)}, zeros_when_missing=True)

    @pytest.mark.parametrize("kind", ["plain", "lazy"])
    def test_text_entries_keep_their_previous_value_where_masked_out(self, kind):
        # strings (non-tensor data) follow the mask like tensors: a skipped element
        # keeps the text it had, not what the step produced for it (an example string)
        new = TensorDict({"a": torch.ones(3)}, [3])
        new.set("text", NonTensorStack.from_list(["new 0", "new 1", "new 2"]))
        new["sub"] = self._nested(kind, torch.ones(3, 1))
        new["sub"].set("text", NonTensorStack.from_list(["s0", "s1", "s2"]))
        old = TensorDict({"a": torch.zeros(3)}, [3])
        old.set("text", NonTensorStack.from_list(["old 0", "old 1", "old 2"]))
        old["sub"] = self._nested(kind, torch.zeros(3, 1))
        old["sub"].set("text", NonTensorData("same", batch_size=[3]))
        out = merge_masked(new, old, {(): torch.tensor([True, False, True])}, zeros_when_missing=True)
        assert out["text"] == ["new 0", "old 1", "new 2"]
        assert out["sub", "text"] == ["s0", "same", "s2"]

    def test_text_without_previous_value_is_kept_as_computed(self):
        new = TensorDict({"a": torch.ones(2)}, [2])
        new.set("text", NonTensorStack.from_list(["x", "y"]))
        out = merge_masked(new, TensorDict({}, [2]), {(): torch.tensor([False, True])}, zeros_when_missing=True)
        assert out["text"] == ["x", "y"]


class _TextEnv(EnvBase):
    """Batch-locked [2] env whose observation comes with its text."""

    def __init__(self):
        super().__init__(batch_size=[2])
        self.observation_spec = Composite(
            count=Unbounded(shape=(2, 1), dtype=torch.int64),
            text=NonTensor(shape=(2,), example_data="example"),
            shape=(2,),
        )
        self.action_spec = Unbounded(shape=(2, 1))
        self.reward_spec = Unbounded(shape=(2, 1))

    def _out(self, count):
        out = TensorDict({"count": count, "done": torch.zeros(2, 1, dtype=torch.bool)}, [2])
        out.set("text", NonTensorStack.from_list([f"at {int(c)}" for c in count.flatten()]))
        return out

    def _reset(self, tensordict=None, **kwargs):
        return self._out(torch.zeros(2, 1, dtype=torch.int64))

    def _step(self, tensordict):
        out = self._out(tensordict["count"] + 1)
        out["reward"] = torch.zeros(2, 1)
        return out

    def _set_seed(self, seed):
        pass


def test_a_partial_step_keeps_the_text_of_the_skipped_elements():
    env = _TextEnv()
    td = env.rand_action(env.reset())
    td["_step"] = torch.tensor([True, False])
    nxt = env.step(td)["next"]
    assert nxt["count"].flatten().tolist() == [1, 0]
    assert nxt["text"] == ["at 1", "at 0"]  # the skipped element's text is its previous one
