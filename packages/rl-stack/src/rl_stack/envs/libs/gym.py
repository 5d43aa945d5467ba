"""Gym and gymnasium names, as ``torchrl.envs.libs.gym``: re-exports only."""

from __future__ import annotations

from rl_env_adapters import (
    GymEnv,
    GymWrapper,
    VecGymEnvTransform,
    gym_backend,
    register_gym_spec_conversion,
    set_gym_backend,
)

__all__ = [
    "GymEnv",
    "GymWrapper",
    "VecGymEnvTransform",
    "gym_backend",
    "register_gym_spec_conversion",
    "set_gym_backend",
]
