"""RolloutSteps: stacking by chunks gives what one torch.stack of every step gives."""

from __future__ import annotations

import pytest
import torch
from tensordict import LazyStackedTensorDict, NonTensorData, TensorDict

from rl_envs_core._stack import DEFERRED_BYTES, RolloutSteps, dense_stack
from rl_envs_core.testing import CountingEnv


def _step(i, batch=(), **extra):
    return TensorDict(
        {
            "obs": torch.full((*batch, 2), float(i)),
            "next": TensorDict(
                {
                    "obs": torch.full((*batch, 2), i + 1.0),
                    "done": torch.zeros(*batch, 1, dtype=torch.bool),
                },
                batch,
            ),
            **extra,
        },
        batch,
    )


def _assert_same(a, b):
    assert type(a) is type(b)
    assert a.batch_size == b.batch_size
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    for key in a.keys(True, True):
        assert a.get(key).dtype == b.get(key).dtype
        assert torch.equal(a.get(key), b.get(key))


def _collect(steps, chunk, lazy=False):
    collector = RolloutSteps(chunk=chunk, lazy=lazy)
    for step in steps:
        collector.append(step)
    return collector.stack()


class TestChunkedStack:
    @pytest.mark.parametrize("n", [1, 3, 4, 5, 8, 13])
    @pytest.mark.parametrize("batch", [(), (3,), (2, 3)])
    def test_matches_torch_stack(self, n, batch):
        steps = [_step(i, batch) for i in range(n)]
        expected = torch.stack(steps, len(batch))
        _assert_same(_collect(steps, chunk=4), expected)

    def test_nested_level_with_a_longer_batch(self):
        steps = [
            TensorDict({"agents": TensorDict({"x": torch.full((2, 3, 1), float(i))}, [2, 3])}, [2])
            for i in range(7)
        ]
        _assert_same(_collect(steps, chunk=3), torch.stack(steps, 1))

    def test_dtypes_promoted_across_chunks_like_torch_stack(self):
        steps = [TensorDict({"a": torch.tensor([i], dtype=torch.int64)}, []) for i in range(3)]
        steps += [TensorDict({"a": torch.tensor([0.5 + i])}, []) for i in range(3)]
        _assert_same(_collect(steps, chunk=3), torch.stack(steps, 0))

    def test_keys_changing_in_a_later_chunk_fail_like_torch_stack(self):
        steps = [_step(i) for i in range(5)] + [_step(5, extra=torch.zeros(1))]
        with pytest.raises(RuntimeError):
            torch.stack(steps, 0)
        with pytest.raises(RuntimeError):
            _collect(steps, chunk=2)

    def test_chunks_with_different_keys_fail_like_torch_stack(self):
        steps = [_step(i) for i in range(2)] + [_step(i, extra=torch.zeros(1)) for i in range(2)]
        with pytest.raises(RuntimeError):
            torch.stack(steps, 0)
        with pytest.raises(RuntimeError):
            _collect(steps, chunk=2)

    def test_non_tensor_entries_use_the_generic_stack(self):
        steps = [_step(i, info=NonTensorData(f"step {i}")) for i in range(5)]
        result = _collect(steps, chunk=2)
        expected = torch.stack(steps, 0)
        assert (
            result.get("info").tolist()
            == expected.get("info").tolist()
            == ["step 0", "step 1", "step 2", "step 3", "step 4"]
        )
        assert torch.equal(result.get(("next", "obs")), expected.get(("next", "obs")))

    def test_a_lazy_step_after_folded_chunks_uses_the_generic_stack(self):
        steps = [_step(i, (2,)) for i in range(5)]
        steps.append(LazyStackedTensorDict.lazy_stack(list(_step(5, (2,)).unbind(0)), 0))
        _assert_same(_collect(steps, chunk=2), torch.stack(steps, 1))

    def test_lazy_gives_a_lazy_stack_of_the_steps(self):
        steps = [_step(i) for i in range(5)]
        result = _collect(steps, chunk=2, lazy=True)
        assert isinstance(result, LazyStackedTensorDict)
        assert all(a is b for a, b in zip(result.tensordicts, steps))

    def test_dense_helpers_refuse_other_layouts(self):
        assert dense_stack([_step(0), _step(1, extra=torch.zeros(1))], 0) is None
        lazy = LazyStackedTensorDict.lazy_stack([_step(0)], 0)
        assert dense_stack([lazy, lazy], 0) is None

    @pytest.mark.parametrize("n", [1, 5, 33, 70])
    @pytest.mark.parametrize("batch", [(), (3,)])
    def test_large_leaves_stacked_once_match_torch_stack(self, n, batch):
        width = DEFERRED_BYTES // 4 + 1  # float32: just above the per-step threshold
        steps = [_step(i, batch, frames=torch.full((*batch, width), float(i))) for i in range(n)]
        result = _collect(steps, chunk=4)
        _assert_same(result, torch.stack(steps, len(batch)))

    def test_large_leaf_whose_dtype_changes_is_promoted_like_torch_stack(self):
        width = DEFERRED_BYTES  # uint8 at the threshold, float above it
        steps = [_step(i, frames=torch.ones(width, dtype=torch.uint8)) for i in range(3)]
        steps += [_step(i, frames=torch.ones(width)) for i in range(3, 6)]
        _assert_same(_collect(steps, chunk=2), torch.stack(steps, 0))

    def test_leaf_crossing_the_threshold_by_dtype_uses_the_generic_stack(self):
        width = DEFERRED_BYTES // 4  # float32: deferred; uint8: stacked per chunk
        steps = [_step(i, frames=torch.full((width,), float(i))) for i in range(4)]
        steps += [_step(i, frames=torch.full((width,), i, dtype=torch.uint8)) for i in (4, 5)]
        _assert_same(_collect(steps, chunk=2), torch.stack(steps, 0))

    def test_large_leaf_becoming_small_uses_the_generic_stack(self):
        steps = [_step(i, frames=torch.ones(DEFERRED_BYTES)) for i in range(3)]
        steps += [_step(i, frames=torch.ones(DEFERRED_BYTES, dtype=torch.uint8)) for i in (3, 4)]
        steps += [_step(i, frames=torch.ones(2)) for i in (5, 6)]
        with pytest.raises(RuntimeError):
            torch.stack(steps, 0)
        with pytest.raises(RuntimeError):
            _collect(steps, chunk=2)


class TestRolloutUsesChunks:
    def test_long_rollout_matches_step_by_step(self):
        env = CountingEnv(max_steps=7, batch_size=[2])
        data = env.rollout(100, break_when_any_done=False)
        assert data.batch_size == torch.Size([2, 100]) and data.names == [None, "time"]
        expected = torch.arange(100).remainder(7).float().expand(2, 100)
        assert torch.equal(data["observation"].squeeze(-1), expected)
        assert torch.equal(
            data["next", "observation"][:, :-1],
            data["observation"][:, 1:].where(
                ~data["next", "done"][:, :-1], data["next", "observation"][:, :-1]
            ),
        )

    def test_callback_edits_are_kept(self):
        def callback(env, td):
            td.set("seen", torch.ones(1))

        data = CountingEnv(max_steps=100).rollout(70, callback=callback)
        assert data["seen"].shape == torch.Size([70, 1]) and bool(data["seen"].all())
