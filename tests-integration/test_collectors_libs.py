"""Collectors over gym, EnvPool and real replay buffers (cross-package)."""

from __future__ import annotations

from functools import partial

import pytest
import torch

from rl_stack.collectors import MultiSyncDataCollector, SyncDataCollector
from rl_stack.data import LazyTensorStorage, ReplayBuffer
from rl_stack.envs import GymEnv, ParallelEnv

pytest.importorskip("gymnasium")


def _check_ted(batch, n_env: int, steps: int) -> None:
    assert batch.batch_size == torch.Size([n_env, steps] if n_env else [steps])
    obs, nxt = batch["observation"], batch["next", "observation"]
    done = batch["next", "done"].squeeze(-1)
    # within a trajectory, the next root is the previous "next"
    same = ~done[..., :-1]
    assert torch.equal(obs[..., 1:, :][same], nxt[..., :-1, :][same])


def test_gym_env_collector_gives_consistent_ted_batches():
    env = GymEnv("CartPole-v1")
    collector = SyncDataCollector(env, None, frames_per_batch=200, total_frames=400)
    collector.set_seed(0)
    batches = list(collector)
    for batch in batches:
        _check_ted(batch, 0, 200)
    ids = torch.cat([b["collector", "traj_ids"] for b in batches])
    episodes = int(torch.cat([b["next", "done"] for b in batches]).sum())
    assert ids.unique().numel() in (episodes, episodes + 1)
    collector.shutdown()


def test_parallel_env_collector_resets_finished_envs_in_the_workers():
    env = ParallelEnv(2, partial(GymEnv, "CartPole-v1"))
    with SyncDataCollector(env, None, frames_per_batch=200, total_frames=200) as collector:
        (batch,) = list(collector)
    _check_ted(batch, 2, 100)
    assert batch["next", "done"].any()
    env.close()


def _discounted_next_reward(batch):
    # a postproc in the spirit of MultiStep: a per-batch transform of the TED data
    reward = batch["next", "reward"]
    shifted = torch.cat([reward[1:], torch.zeros_like(reward[:1])])
    return batch.set("reward_2", reward + 0.9 * shifted)


def test_postproc_and_replay_buffer():
    rb = ReplayBuffer(storage=LazyTensorStorage(1000))
    collector = SyncDataCollector(
        GymEnv("CartPole-v1"),
        None,
        frames_per_batch=100,
        total_frames=300,
        postproc=_discounted_next_reward,
        replay_buffer=rb,
    )
    assert list(collector) == [None, None, None]
    assert len(rb) == 300
    assert "reward_2" in rb[:].keys()


def test_replay_buffer_too_small_for_one_batch_is_reported():
    rb = ReplayBuffer(storage=LazyTensorStorage(50))
    collector = SyncDataCollector(
        GymEnv("CartPole-v1"), None, frames_per_batch=100, replay_buffer=rb
    )
    with pytest.raises(ValueError, match=r"needs 100 elements.*max_size=50"):
        collector.next()
    assert len(rb) == 0


def test_multi_sync_collector_over_gym_envs():
    make = partial(GymEnv, "CartPole-v1")
    with MultiSyncDataCollector(
        [make, make], None, frames_per_batch=100, total_frames=200
    ) as collector:
        batches = list(collector)
    for batch in batches:
        assert batch.batch_size == torch.Size([2, 50])
        assert set(batch["collector", "traj_ids"][0].tolist()).isdisjoint(
            batch["collector", "traj_ids"][1].tolist()
        )


def test_envpool_collector():
    pytest.importorskip("envpool")
    from rl_stack.envs import MultiThreadedEnv

    env = MultiThreadedEnv(4, "CartPole-v1")
    with SyncDataCollector(env, None, frames_per_batch=400, total_frames=400) as collector:
        (batch,) = list(collector)
    _check_ted(batch, 4, 100)
    env.close()
