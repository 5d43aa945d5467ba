"""Collectors over gym and EnvPool: in-place batches equal the general path's (cross-package).

Each adapter class is compared with a subclass whose ``buffered_stepper`` declines
(the general path, ``env.step`` per step), on the same seed: every batch, traj ids
included, must be bit-equal.
"""

from __future__ import annotations

from functools import partial

import pytest
import torch

from rl_stack.collectors import SyncDataCollector
from rl_stack.envs import GymEnv, MultiThreadedEnv, ParallelEnv, SerialEnv

pytest.importorskip("gymnasium")


class GeneralGymEnv(GymEnv):
    def buffered_stepper(self, batch):
        return None


class GeneralPoolEnv(MultiThreadedEnv):
    def buffered_stepper(self, batch):
        return None


def _batches(env, frames_per_batch, n=3):
    torch.manual_seed(0)
    collector = SyncDataCollector(env, None, frames_per_batch=frames_per_batch, total_frames=-1)
    batches = []
    for batch in collector:
        batches.append(batch.clone())
        if len(batches) == n:
            break
    collector.shutdown()
    return batches


def _assert_same(got, want):
    for a, b in zip(got, want, strict=True):
        assert a.batch_size == b.batch_size and a.names == b.names
        assert set(a.keys(True, True)) == set(b.keys(True, True))
        for key in b.keys(True, True):
            assert a.get(key).dtype == b.get(key).dtype, key
            assert torch.equal(a.get(key), b.get(key)), key


def _seeded(env):
    env.set_seed(0)
    return env


def test_gym_collector_in_place_equals_the_general_path():
    got = _batches(_seeded(GymEnv("CartPole-v1")), 200)
    want = _batches(_seeded(GeneralGymEnv("CartPole-v1")), 200)
    _assert_same(got, want)
    assert int(torch.cat([b["next", "done"] for b in got]).sum()) > 3  # resets happened


def test_envpool_collector_in_place_equals_the_general_path():
    pytest.importorskip("envpool")
    kwargs = {"create_env_kwargs": {"seed": 1}}
    got = _batches(MultiThreadedEnv(6, "CartPole-v1", **kwargs), 300)
    want = _batches(GeneralPoolEnv(6, "CartPole-v1", **kwargs), 300)
    _assert_same(got, want)


@pytest.mark.parametrize("batched", [SerialEnv, ParallelEnv], ids=["serial", "parallel"])
def test_batched_gym_collectors_in_place_equal_the_general_path(batched):
    got = _batches(_seeded(batched(3, partial(GymEnv, "CartPole-v1"))), 150)
    want = _batches(_seeded(batched(3, partial(GeneralGymEnv, "CartPole-v1"))), 150)
    _assert_same(got, want)
