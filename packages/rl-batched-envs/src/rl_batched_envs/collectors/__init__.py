"""Data collectors: iterables of TED batches from envs, in this process or in workers.

TorchRL 0.14's names for the same classes are aliases: ``Collector`` is
``SyncDataCollector``, ``MultiSyncCollector`` / ``MultiAsyncCollector`` /
``AsyncCollector`` the multi-process ones, ``BaseCollector`` is
``DataCollectorBase``; ``MultiCollector(..., sync=)`` builds either multi-process one.
"""

from __future__ import annotations

from rl_batched_envs.collectors._base import DataCollectorBase
from rl_batched_envs.collectors._multi import (
    MultiaSyncDataCollector,
    MultiCollector,
    MultiSyncDataCollector,
    aSyncDataCollector,
)
from rl_batched_envs.collectors._split import split_trajectories
from rl_batched_envs.collectors._sync import SyncDataCollector

Collector = SyncDataCollector
MultiSyncCollector = MultiSyncDataCollector
MultiAsyncCollector = MultiaSyncDataCollector
AsyncCollector = aSyncDataCollector
BaseCollector = DataCollectorBase

__all__: list[str] = [
    "AsyncCollector",
    "BaseCollector",
    "Collector",
    "DataCollectorBase",
    "MultiAsyncCollector",
    "MultiCollector",
    "MultiSyncCollector",
    "MultiSyncDataCollector",
    "MultiaSyncDataCollector",
    "SyncDataCollector",
    "aSyncDataCollector",
    "split_trajectories",
]
