"""Adapters from gymnasium, EnvPool and other simulators to EnvBase."""

from __future__ import annotations

from rl_env_adapters._gym._backend import gym_backend, set_gym_backend
from rl_env_adapters._implement_for import implement_for
from rl_env_adapters._libraries import get_available_libraries

__version__ = "0.1.0"

__all__: list[str] = [
    "get_available_libraries",
    "gym_backend",
    "implement_for",
    "set_gym_backend",
]
