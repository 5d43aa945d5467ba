"""SerialEnv, ParallelEnv, EnvCreator, async env pools and the data collectors."""

from __future__ import annotations

from rl_batched_envs._async_pool import AsyncEnvPool, ProcessorAsyncEnvPool, ThreadingAsyncEnvPool
from rl_batched_envs._env_creator import EnvCreator
from rl_batched_envs._parallel import ParallelEnv
from rl_batched_envs._serial import SerialEnv
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
from rl_batched_envs.collectors._ray import RayCollector

__version__ = "0.1.0"

__all__: list[str] = [
    "AsyncCollector",
    "AsyncEnvPool",
    "BaseCollector",
    "Collector",
    "DataCollectorBase",
    "EnvCreator",
    "MultiAsyncCollector",
    "MultiCollector",
    "MultiSyncCollector",
    "MultiSyncDataCollector",
    "MultiaSyncDataCollector",
    "ParallelEnv",
    "ProcessorAsyncEnvPool",
    "RayCollector",
    "SerialEnv",
    "SyncDataCollector",
    "ThreadingAsyncEnvPool",
    "aSyncDataCollector",
    "split_trajectories",
]
