"""Native environments, model-based environments and exploration helpers."""

from __future__ import annotations

from rl_envs_core._native._chess import ChessEnv
from rl_envs_core._native._dreamer import DreamerDecoder, DreamerEnv
from rl_envs_core._native._exploration import (
    ExplorationType,
    exploration_type,
    set_exploration_type,
)
from rl_envs_core._native._llm_hashing import LLMHashingEnv
from rl_envs_core._native._model_based import ModelBasedEnvBase
from rl_envs_core._native._pendulum import PendulumEnv
from rl_envs_core._native._random_policy import RandomPolicy
from rl_envs_core._native._tictactoe import TicTacToeEnv

__all__: list[str] = [
    "ChessEnv",
    "DreamerDecoder",
    "DreamerEnv",
    "ExplorationType",
    "LLMHashingEnv",
    "ModelBasedEnvBase",
    "PendulumEnv",
    "RandomPolicy",
    "TicTacToeEnv",
    "exploration_type",
    "set_exploration_type",
]
