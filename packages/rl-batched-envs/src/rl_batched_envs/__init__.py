"""SerialEnv, ParallelEnv, EnvCreator and async env pools."""

from __future__ import annotations

from rl_batched_envs._async_pool import AsyncEnvPool, ProcessorAsyncEnvPool, ThreadingAsyncEnvPool
from rl_batched_envs._env_creator import EnvCreator
from rl_batched_envs._parallel import ParallelEnv
from rl_batched_envs._serial import SerialEnv

__version__ = "0.1.0"

__all__: list[str] = [
    "AsyncEnvPool",
    "EnvCreator",
    "ParallelEnv",
    "ProcessorAsyncEnvPool",
    "SerialEnv",
    "ThreadingAsyncEnvPool",
]
