"""As ``torchrl.record.loggers.mlflow``: re-exports only."""

from __future__ import annotations

from rl_transforms.loggers import MLFlowLogger

__all__ = ["MLFlowLogger"]
