"""Recorders and loggers, laid out like ``torchrl.record``: re-exports only."""

from __future__ import annotations

from rl_stack.record import loggers, recorder
from rl_stack.record.loggers import (
    CSVLogger,
    Logger,
    MLFlowLogger,
    TensorboardLogger,
    WandbLogger,
    generate_exp_name,
    get_logger,
)
from rl_stack.record.recorder import PixelRenderTransform, TensorDictRecorder, VideoRecorder

__all__ = [
    "CSVLogger",
    "Logger",
    "MLFlowLogger",
    "PixelRenderTransform",
    "TensorDictRecorder",
    "TensorboardLogger",
    "VideoRecorder",
    "WandbLogger",
    "generate_exp_name",
    "get_logger",
]
