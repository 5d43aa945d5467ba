"""Experiment loggers, laid out like ``torchrl.record.loggers``.

:class:`CSVLogger` needs nothing beyond rl-transforms (mp4 videos need the
``video`` extra); :class:`TensorboardLogger`, :class:`WandbLogger` and
:class:`MLFlowLogger` need the ``loggers`` extra, imported when one is built.
"""

from __future__ import annotations

from rl_transforms.loggers._common import Logger
from rl_transforms.loggers._csv import CSVLogger
from rl_transforms.loggers._factory import generate_exp_name, get_logger
from rl_transforms.loggers._mlflow import MLFlowLogger
from rl_transforms.loggers._tensorboard import TensorboardLogger
from rl_transforms.loggers._wandb import WandbLogger

__all__: list[str] = [
    "CSVLogger",
    "Logger",
    "MLFlowLogger",
    "TensorboardLogger",
    "WandbLogger",
    "generate_exp_name",
    "get_logger",
]
