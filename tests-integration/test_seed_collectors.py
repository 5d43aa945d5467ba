"""The seeds' collector examples (002 "Storing trajectories" and "Checkpointing Replay
Buffers"), run verbatim on our API with only the imports changed."""

from __future__ import annotations

import pytest
import torch
from tensordict import assert_allclose_td

from rl_stack.collectors import RandomPolicy, SyncDataCollector
from rl_stack.data import (
    H5StorageCheckpointer,
    LazyMemmapStorage,
    LazyTensorStorage,
    ReplayBuffer,
    SliceSampler,
)
from rl_stack.envs import GymEnv, SerialEnv, StepCounter, TransformedEnv

pytest.importorskip("gymnasium")


def _consecutive_or_restart(counts: torch.Tensor) -> bool:
    """Along dim 0, each step count is the previous one plus one, or a new episode's 1."""
    steps = counts[1:] - counts[:-1]
    return bool(((steps == 1) | (counts[1:] == 1)).all())


def test_seed_slice_sampler_with_a_single_env_collector():
    # 002 "Storing trajectories", first example
    env = TransformedEnv(GymEnv("CartPole-v1"), StepCounter())
    collector = SyncDataCollector(
        env, RandomPolicy(env.action_spec), frames_per_batch=10, total_frames=-1
    )
    rb = ReplayBuffer(
        storage=LazyTensorStorage(100),
        sampler=SliceSampler(
            num_slices=8,
            traj_key=("collector", "traj_ids"),
            truncated_key=None,
            strict_length=False,
        ),
        batch_size=64,
    )
    for i, data in enumerate(collector):
        rb.extend(data)
        if i == 10:
            break
    assert len(rb) == 100, len(rb)
    counts = rb[:]["next", "step_count"]
    assert counts.shape == torch.Size([100, 1])
    # the buffer wrapped around once: steps are consecutive except at episode starts
    # and at the write cursor (frame 10, where the newest batch meets the oldest)
    assert _consecutive_or_restart(counts[10:].squeeze(-1))
    sample = rb.sample()
    assert sample.shape[0] <= 64
    collector.shutdown()


def test_seed_ndim2_storage_with_a_two_env_collector():
    # 002 "Storing trajectories", second example: frames_per_batch=1 with 2 envs
    env = TransformedEnv(SerialEnv(2, lambda: GymEnv("CartPole-v1")), StepCounter())
    with pytest.warns(UserWarning, match="frames_per_batch=1"):
        collector = SyncDataCollector(
            env, RandomPolicy(env.action_spec), frames_per_batch=1, total_frames=-1
        )
    rb = ReplayBuffer(
        storage=LazyTensorStorage(100, ndim=2),
        sampler=SliceSampler(
            num_slices=8,
            traj_key=("collector", "traj_ids"),
            truncated_key=None,
            strict_length=False,
        ),
        batch_size=64,
    )
    for i, data in enumerate(collector):
        rb.extend(data)
        if i == 100:
            break
    assert len(rb) == 100, len(rb)
    counts = rb[:]["next", "step_count"].squeeze()
    assert counts.shape == torch.Size([50, 2])
    # one column per env; below the write cursor (row 1) each column counts on
    assert _consecutive_or_restart(counts[1:, 0]) and _consecutive_or_restart(counts[1:, 1])
    collector.shutdown()
    env.close()


def test_seed_h5_checkpointer_fed_by_a_collector(tmp_path):
    # 002 "Checkpointing Replay Buffers"
    pytest.importorskip("h5py")
    path_to_save_dir = tmp_path
    env = SerialEnv(3, lambda: GymEnv("CartPole-v1", device=None))
    env.set_seed(0)
    torch.manual_seed(0)
    collector = SyncDataCollector(env, policy=env.rand_step, total_frames=200, frames_per_batch=22)
    rb = ReplayBuffer(storage=LazyMemmapStorage(100, ndim=2))
    rb_test = ReplayBuffer(storage=LazyMemmapStorage(100, ndim=2))
    rb.storage.checkpointer = H5StorageCheckpointer()
    rb_test.storage.checkpointer = H5StorageCheckpointer()
    for i, data in enumerate(collector):  # noqa: B007 (the seed's loop, verbatim)
        rb.extend(data)
        assert rb._storage.max_size == 102
        rb.dumps(path_to_save_dir)
        rb_test.loads(path_to_save_dir)
        assert_allclose_td(rb_test[:], rb[:])
    assert i == 8  # 22 frames round up to 24 (8 steps of 3 envs); 200 frames: 9 batches
    env.close()
