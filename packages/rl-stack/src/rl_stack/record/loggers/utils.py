"""As ``torchrl.record.loggers.utils``: re-exports only."""

from __future__ import annotations

from rl_transforms.loggers import generate_exp_name, get_logger

__all__ = ["generate_exp_name", "get_logger"]
