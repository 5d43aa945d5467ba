"""The gym-like env template, as ``torchrl.envs.gym_like``: re-exports only."""

from __future__ import annotations

from rl_envs_core import GymLikeEnv

__all__ = [
    "GymLikeEnv",
]
