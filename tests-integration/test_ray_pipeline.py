"""RayCollector actors writing into a sharded RayReplayBuffer, a learner sampling from it."""

from __future__ import annotations

import functools

import pytest
import torch

ray = pytest.importorskip("ray")

from rl_batched_envs import RayCollector  # noqa: E402
from rl_envs_core.testing import CountingEnv  # noqa: E402
from rl_replay import LazyTensorStorage, MinSize, RayReplayBuffer  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def cluster():
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_collector_actors_fill_a_sharded_buffer():
    rb = RayReplayBuffer(
        storage=LazyTensorStorage(200),
        num_shards=2,
        batch_size=16,
        rate_limiter=MinSize(16),
    )
    collector = RayCollector(
        functools.partial(CountingEnv, max_steps=5),
        num_collectors=2,
        frames_per_batch=20,
        total_frames=80,
        replay_buffer=rb,
    )
    try:
        assert list(collector) == [None] * 4  # the actors wrote the batches themselves
        assert collector.frames_per_collector == [40, 40]
        stats = rb.stats()
        assert stats["inserts"] == 80 and len(rb) == 80  # 8 batches of 10 steps
        assert [shard["len"] for shard in stats["shards"]] == [40, 40]
        batch = rb.sample()
        assert batch.batch_size == torch.Size([16])
        assert set(batch["collector", "traj_ids"].tolist()) <= set(range(32))
    finally:
        collector.shutdown()
        rb.shutdown()
