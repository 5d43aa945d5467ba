"""``env[item]`` on SerialEnv / ParallelEnv: live views on some sub-envs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rl_batched_envs import ParallelEnv, SerialEnv
from rl_envs_core.testing import CountingEnv

CLASSES = [SerialEnv, ParallelEnv]


def counts(env):
    return [int(c) for c in env.count]


def push(env):
    """One step of every env of ``env`` with action 1."""
    td = env.full_action_spec.zero()
    td["action"] = env.action_spec.one()
    return env.step(td)


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("use_buffers", [True, False])
@pytest.mark.parametrize(
    "item, picked",
    [
        (1, [1]),
        (-1, [3]),
        (slice(0, 4, 2), [0, 2]),
        (np.array([3, 0]), [3, 0]),
        (torch.tensor([2]), [2]),
    ],
)
def test_stepping_a_view_moves_only_the_picked_sub_envs_of_the_parent(
    cls, use_buffers, item, picked
):
    env = cls(4, CountingEnv, use_buffers=use_buffers)
    try:
        env.reset()
        view = env[item]
        assert type(view).__name__ == cls.__name__ and isinstance(view, cls)
        assert view.num_workers == len(picked) and view.batch_size == (len(picked),)
        out = push(view)
        assert out["next", "observation"].squeeze(-1).tolist() == [1.0] * len(picked)
        expected = [1 if i in picked else 0 for i in range(4)]
        assert counts(env) == expected
        assert counts(view) == [1] * len(picked)
        view.reset()
        assert counts(env) == [0] * 4
        view.close()
        assert not env.is_closed
        env.rand_step()  # the parent keeps running
    finally:
        env.close(raise_if_closed=False)


@pytest.mark.parametrize("cls", CLASSES)
def test_a_view_has_the_parents_specs_restricted_to_its_envs(cls):
    env = cls(3, CountingEnv)
    try:
        view = env[1:]
        assert view.action_spec.shape == (2, 1)
        assert view.full_done_spec["done"].shape == (2, 1)
        view.check_env_specs()
        assert view.rollout(3).batch_size == (2, 3)
    finally:
        env.close()


@pytest.mark.parametrize("cls", CLASSES)
def test_partial_reset_of_a_view_keeps_the_other_envs_data(cls):
    env = cls(3, CountingEnv)
    try:
        env.reset()
        view = env[[0, 2]]
        push(view)
        td = view.reset()
        push(view)
        td = view.step(td.update(view.full_action_spec.one()))["next"]
        td.set("_reset", torch.tensor([[True], [False]]))
        out = view.reset(td)
        assert out["observation"].squeeze(-1).tolist() == [0.0, 2.0]
        assert counts(env) == [0, 0, 2]
    finally:
        env.close()


@pytest.mark.parametrize("cls", CLASSES)
def test_a_closed_view_refuses_to_run_and_the_parent_does_not_care(cls):
    env = cls(2, CountingEnv)
    view = env[0]
    view.close()
    assert view.is_closed and not env.is_closed
    with pytest.raises(RuntimeError, match="closed indexed view"):
        view.reset()
    with pytest.raises(RuntimeError, match="raise_if_closed=False"):
        view.close()
    view.close(raise_if_closed=False)
    env.rand_step()
    env.close()


@pytest.mark.parametrize("cls", CLASSES)
def test_a_view_of_a_closed_parent_raises(cls):
    env = cls(2, CountingEnv)
    view = env[:1]
    env.close()
    with pytest.raises(RuntimeError, match="parent environment has been closed"):
        view.rand_step()
    assert view.is_closed


@pytest.mark.parametrize("cls", CLASSES)
def test_a_view_keeps_its_parent_alive(cls):
    env = cls(3, CountingEnv)[2:]
    try:
        assert env.num_workers == 1
        assert env.rollout(2).batch_size == (1, 2)
    finally:
        env.close()
        env.parent.close()


def test_views_compose_and_forward_methods_and_seeds():
    env = SerialEnv(4, CountingEnv, {"max_steps": 7})
    view = env[1:][::2]  # envs 1 and 3
    assert view.env_indices == [1, 3]
    assert view.max_steps == [7, 7]
    assert view.set_seed(3) is not None
    env.reset()
    push(view)
    assert counts(env) == [0, 1, 0, 1]


@pytest.mark.parametrize("item", [np.ones(2, dtype=bool), torch.tensor([True, False]), True])
def test_boolean_masks_are_refused(item):
    env = SerialEnv(2, CountingEnv)
    with pytest.raises(NotImplementedError, match="Boolean masks"):
        env[item]


@pytest.mark.parametrize("item", [2, -3, slice(5, 9), [0, 4], torch.zeros(1, 1, dtype=torch.long)])
def test_bad_indices_raise_index_error(item):
    env = SerialEnv(2, CountingEnv)
    with pytest.raises(IndexError):
        env[item]


@pytest.mark.parametrize("cls", CLASSES)
def test_assigning_an_env_into_a_batched_env_is_refused_and_harmless(cls):
    env = cls(2, CountingEnv)
    try:
        with pytest.raises(NotImplementedError, match="snapshot writeback"):
            env[0] = CountingEnv()
        env.rand_step()
    finally:
        env.close()
