"""Async env pools, as ``torchrl.envs.async_envs``: re-exports only."""

from __future__ import annotations

from rl_batched_envs import AsyncEnvPool, ProcessorAsyncEnvPool, ThreadingAsyncEnvPool

__all__ = [
    "AsyncEnvPool",
    "ProcessorAsyncEnvPool",
    "ThreadingAsyncEnvPool",
]
