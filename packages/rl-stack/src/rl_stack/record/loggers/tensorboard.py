"""As ``torchrl.record.loggers.tensorboard``: re-exports only."""

from __future__ import annotations

from rl_transforms.loggers import TensorboardLogger

__all__ = ["TensorboardLogger"]
