"""Transforms inside and around batched envs; Serial and Parallel envs agree."""

from __future__ import annotations

import functools

import pytest
import torch

from rl_batched_envs import AsyncEnvPool, ParallelEnv, SerialEnv
from rl_envs_core import PendulumEnv, check_env_specs
from rl_envs_core.testing import CountingEnv
from rl_transforms import Compose, DoubleToFloat, RewardSum, StepCounter, TransformedEnv

MAX_STEPS = 4


def counting_env_with_step_counter() -> TransformedEnv:
    return TransformedEnv(CountingEnv(max_steps=100), StepCounter(max_steps=MAX_STEPS))


@pytest.fixture(params=[SerialEnv, ParallelEnv], ids=["serial", "parallel"])
def batched_cls(request):
    return request.param


def test_transform_around_batched_env_counts_steps_and_sums_rewards(batched_cls):
    base = batched_cls(3, functools.partial(CountingEnv, max_steps=5))
    env = TransformedEnv(base, Compose(StepCounter(), RewardSum()))
    try:
        check_env_specs(env)
        data = env.rollout(5)
        assert data.batch_size == torch.Size([3, 5])
        expected_counts = torch.arange(1, 6).expand(3, 5)
        assert torch.equal(data["next", "step_count"].squeeze(-1), expected_counts)
        cumulated = data["next", "reward"].squeeze(-1).cumsum(-1)
        torch.testing.assert_close(data["next", "episode_reward"].squeeze(-1), cumulated)
    finally:
        env.close()


def test_transform_inside_workers_truncates_at_max_steps(batched_cls):
    env = batched_cls(2, counting_env_with_step_counter)
    try:
        check_env_specs(env)
        data = env.rollout(10)
        assert data.shape[-1] == MAX_STEPS  # the rollout stops when every worker is truncated
        assert data["next", "truncated"][:, -1].all()
        assert not data["next", "truncated"][:, :-1].any()
        assert torch.equal(data["next", "step_count"][:, -1].squeeze(-1), torch.tensor([4, 4]))
    finally:
        env.close()


def test_step_and_maybe_reset_restarts_step_counter_inside_workers(batched_cls):
    env = batched_cls(2, counting_env_with_step_counter)
    try:
        data = env.rollout(3 * MAX_STEPS, break_when_any_done=False)
        counts = data["next", "step_count"].squeeze(-1)
        # the counter restarts after every truncation: 1, 2, 3, 4, 1, 2, ...
        expected = (torch.arange(3 * MAX_STEPS) % MAX_STEPS + 1).expand(2, -1)
        assert torch.equal(counts, expected)
    finally:
        env.close()


def test_serial_and_parallel_envs_give_identical_rollouts_for_the_same_seed():
    def rollout(cls):
        env = TransformedEnv(cls(2, PendulumEnv), DoubleToFloat())
        try:
            env.set_seed(7)
            torch.manual_seed(0)
            return env.rollout(20)
        finally:
            env.close()

    serial, parallel = rollout(SerialEnv), rollout(ParallelEnv)
    assert serial.batch_size == parallel.batch_size == torch.Size([2, 20])
    for key in serial.keys(True, True):
        torch.testing.assert_close(serial[key], parallel[key], msg=f"mismatch at {key}")


@pytest.mark.parametrize("backend", ["threading", "multiprocessing"])
def test_async_pool_of_transformed_envs_passes_check_env_specs(backend):
    env = AsyncEnvPool([counting_env_with_step_counter] * 2, backend=backend)
    try:
        check_env_specs(env)
    finally:
        env.close()
