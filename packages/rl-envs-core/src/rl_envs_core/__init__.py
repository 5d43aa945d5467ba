"""EnvBase, the TED rollout machinery and native environments."""

from __future__ import annotations

from rl_envs_core import _native
from rl_envs_core._check import check_env_specs
from rl_envs_core._env_base import EnvBase
from rl_envs_core._gym_like import GymLikeEnv
from rl_envs_core._marl import MarlGroupMapType, check_marl_grouping
from rl_envs_core._metadata import EnvMetaData
from rl_envs_core._native import *
from rl_envs_core._step_mdp import step_mdp, terminated_or_truncated

__version__ = "0.1.0"

__all__: list[str] = [
    "EnvBase",
    "EnvMetaData",
    "GymLikeEnv",
    "MarlGroupMapType",
    "check_env_specs",
    "check_marl_grouping",
    "step_mdp",
    "terminated_or_truncated",
    *_native.__all__,
]
