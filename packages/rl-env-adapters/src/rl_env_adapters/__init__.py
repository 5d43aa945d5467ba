"""Adapters from gymnasium, EnvPool and other simulators to EnvBase.

Importing this package imports no backend: gymnasium is imported when a gym class
is built (or a gym helper called), envpool when an EnvPool env is built.
"""

from __future__ import annotations

from rl_env_adapters._envpool._env import MultiThreadedEnv, MultiThreadedEnvWrapper
from rl_env_adapters._gym._backend import gym_backend, set_gym_backend
from rl_env_adapters._gym._env import GymEnv
from rl_env_adapters._gym._spaces import register_gym_spec_conversion
from rl_env_adapters._gym._vec_transform import VecGymEnvTransform
from rl_env_adapters._gym._wrapper import GymWrapper
from rl_env_adapters._implement_for import implement_for
from rl_env_adapters._libraries import get_available_libraries

__version__ = "0.1.0"

__all__: list[str] = [
    "GymEnv",
    "GymWrapper",
    "MultiThreadedEnv",
    "MultiThreadedEnvWrapper",
    "VecGymEnvTransform",
    "get_available_libraries",
    "gym_backend",
    "implement_for",
    "register_gym_spec_conversion",
    "set_gym_backend",
]
