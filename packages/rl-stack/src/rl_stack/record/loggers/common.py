"""As ``torchrl.record.loggers.common``: re-exports only."""

from __future__ import annotations

from rl_transforms.loggers import Logger

__all__ = ["Logger"]
