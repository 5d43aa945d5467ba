"""Native envs, as ``torchrl.envs.custom``: re-exports only."""

from __future__ import annotations

from rl_envs_core import ChessEnv, LLMHashingEnv, PendulumEnv, TicTacToeEnv

__all__ = [
    "ChessEnv",
    "LLMHashingEnv",
    "PendulumEnv",
    "TicTacToeEnv",
]
