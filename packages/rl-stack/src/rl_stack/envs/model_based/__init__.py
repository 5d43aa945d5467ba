"""Model-based envs, as ``torchrl.envs.model_based``: re-exports only."""

from __future__ import annotations

from rl_envs_core import DreamerDecoder, DreamerEnv, ModelBasedEnvBase

__all__ = [
    "DreamerDecoder",
    "DreamerEnv",
    "ModelBasedEnvBase",
]
