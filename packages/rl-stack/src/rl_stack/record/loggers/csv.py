"""As ``torchrl.record.loggers.csv``: re-exports only."""

from __future__ import annotations

from rl_transforms.loggers import CSVLogger

__all__ = ["CSVLogger"]
