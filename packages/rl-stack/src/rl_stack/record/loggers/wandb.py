"""As ``torchrl.record.loggers.wandb``: re-exports only."""

from __future__ import annotations

from rl_transforms.loggers import WandbLogger

__all__ = ["WandbLogger"]
