"""The collector classes, as ``torchrl.collectors.collectors``: re-exports only."""

from __future__ import annotations

from rl_batched_envs.collectors import (
    AsyncCollector,
    BaseCollector,
    Collector,
    DataCollectorBase,
    MultiAsyncCollector,
    MultiaSyncDataCollector,
    MultiCollector,
    MultiSyncCollector,
    MultiSyncDataCollector,
    SyncDataCollector,
    aSyncDataCollector,
)

__all__ = [
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
]
