"""The env base class, as ``torchrl.envs.common``: re-exports only."""

from __future__ import annotations

from rl_envs_core import EnvBase, EnvMetaData

__all__ = [
    "EnvBase",
    "EnvMetaData",
]
