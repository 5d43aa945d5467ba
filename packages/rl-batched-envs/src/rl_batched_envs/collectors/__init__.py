"""Data collectors: iterables of TED batches from envs, in this process or in workers."""

from __future__ import annotations

from rl_batched_envs.collectors._base import DataCollectorBase
from rl_batched_envs.collectors._split import split_trajectories
from rl_batched_envs.collectors._sync import SyncDataCollector

__all__: list[str] = [
    "DataCollectorBase",
    "SyncDataCollector",
    "split_trajectories",
]
