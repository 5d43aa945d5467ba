"""EnvPool names, as ``torchrl.envs.libs.envpool``: re-exports only."""

from __future__ import annotations

from rl_env_adapters import MultiThreadedEnv, MultiThreadedEnvWrapper

__all__ = [
    "MultiThreadedEnv",
    "MultiThreadedEnvWrapper",
]
