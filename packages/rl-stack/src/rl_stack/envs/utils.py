"""Env helpers, as ``torchrl.envs.utils``: re-exports only."""

from __future__ import annotations

from rl_envs_core import (
    ExplorationType,
    MarlGroupMapType,
    RandomPolicy,
    check_env_specs,
    check_marl_grouping,
    exploration_type,
    set_exploration_type,
    step_mdp,
    terminated_or_truncated,
)
from rl_specs import make_composite_from_td

__all__ = [
    "ExplorationType",
    "MarlGroupMapType",
    "RandomPolicy",
    "check_env_specs",
    "check_marl_grouping",
    "exploration_type",
    "make_composite_from_td",
    "set_exploration_type",
    "step_mdp",
    "terminated_or_truncated",
]
