"""Data collectors, laid out like ``torchrl.collectors``: re-exports only.

``rl_stack.collectors.collectors`` and ``rl_stack.collectors.utils`` mirror TorchRL's
submodules, so code written against ``torchrl.collectors`` runs after changing only
its imports.

Examples:
    >>> import rl_batched_envs
    >>> from rl_stack.collectors import Collector, SyncDataCollector
    >>> Collector is SyncDataCollector is rl_batched_envs.SyncDataCollector
    True
"""

from __future__ import annotations

from rl_batched_envs import RayCollector
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
    split_trajectories,
)
from rl_envs_core import RandomPolicy
from rl_stack.collectors import collectors, distributed, utils

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
    "RandomPolicy",
    "RayCollector",
    "SyncDataCollector",
    "aSyncDataCollector",
    "split_trajectories",
]
