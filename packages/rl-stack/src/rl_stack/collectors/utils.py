"""Collector utilities, as ``torchrl.collectors.utils``: re-exports only."""

from __future__ import annotations

from rl_batched_envs.collectors import split_trajectories

__all__ = ["split_trajectories"]
