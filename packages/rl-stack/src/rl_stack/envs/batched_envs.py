"""Batched envs, as ``torchrl.envs.batched_envs``: re-exports only."""

from __future__ import annotations

from rl_batched_envs import ParallelEnv, SerialEnv

__all__ = [
    "ParallelEnv",
    "SerialEnv",
]
