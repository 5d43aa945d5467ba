"""EnvCreator, as ``torchrl.envs.env_creator``: re-exports only."""

from __future__ import annotations

from rl_batched_envs import EnvCreator

__all__ = [
    "EnvCreator",
]
