"""Loggers, laid out like ``torchrl.record.loggers``: re-exports only."""

from __future__ import annotations

from rl_stack.record.loggers import common, csv, mlflow, tensorboard, utils, wandb
from rl_transforms.loggers import *
from rl_transforms.loggers import __all__ as _names

__all__ = list(_names)
