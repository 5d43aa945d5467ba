"""``get_logger`` (a logger from its type name) and ``generate_exp_name``."""

from __future__ import annotations

import os
import pathlib
import uuid
from datetime import datetime
from typing import Any

from rl_transforms.loggers._common import Logger
from rl_transforms.loggers._csv import CSVLogger
from rl_transforms.loggers._mlflow import MLFlowLogger
from rl_transforms.loggers._tensorboard import TensorboardLogger
from rl_transforms.loggers._wandb import WandbLogger

LOGGER_TYPES = ("tensorboard", "csv", "wandb", "mlflow")


def generate_exp_name(model_name: str, experiment_name: str) -> str:
    """Generates an ID (str) for the described experiment using UUID and current date.

    The name is ``<model_name>_<experiment_name>_<8 hex digits>_<yy_mm_dd-HH_MM_SS>``.

    Examples:
        >>> name = generate_exp_name("SAC", "cheetah")
        >>> name.startswith("SAC_cheetah_"), len(name.split("_")[2])
        (True, 8)
    """
    stamp = datetime.now().strftime("%y_%m_%d-%H_%M_%S")
    return "_".join((model_name, experiment_name, uuid.uuid4().hex[:8], stamp))


def get_logger(
    logger_type: str | None,
    logger_name: str,
    experiment_name: str,
    **kwargs: Any,  # Any: wandb_kwargs / mlflow_kwargs dicts
) -> Logger | None:
    """Get a logger instance of the provided `logger_type`.

    Args:
        logger_type (str): ``"tensorboard"``, ``"csv"`` (mp4 videos), ``"wandb"``
            or ``"mlflow"``; ``""`` or ``None`` gives ``None`` (no logging).
        logger_name (str): the log folder (for mlflow, a local tracking store).
        experiment_name (str): the name of the experiment.
        **kwargs: ``wandb_kwargs`` (for :class:`WandbLogger`) or ``mlflow_kwargs``
            (for :class:`MLFlowLogger`), dicts of extra arguments.

    Raises:
        ValueError: if ``logger_type`` is not one of the four.

    Examples:
        >>> import tempfile
        >>> logger = get_logger("csv", tempfile.mkdtemp(), "run")
        >>> type(logger).__name__, logger.video_format
        ('CSVLogger', 'mp4')
        >>> get_logger("", "unused", "run") is None
        True
    """
    if logger_type in ("", None):
        return None
    if logger_type == "csv":
        return CSVLogger(log_dir=logger_name, exp_name=experiment_name, video_format="mp4")
    if logger_type == "tensorboard":
        return TensorboardLogger(log_dir=logger_name, exp_name=experiment_name)
    if logger_type == "wandb":
        return WandbLogger(
            save_dir=logger_name, exp_name=experiment_name, **kwargs.get("wandb_kwargs", {})
        )
    if logger_type == "mlflow":
        uri = pathlib.Path(os.path.abspath(logger_name)).as_uri()
        return MLFlowLogger(
            tracking_uri=uri, exp_name=experiment_name, **kwargs.get("mlflow_kwargs", {})
        )
    raise ValueError(
        f"get_logger expected logger_type to be one of {LOGGER_TYPES} (or '' / None for no "
        f"logger), got {logger_type!r}."
    )
