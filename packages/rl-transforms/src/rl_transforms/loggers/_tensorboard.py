"""``TensorboardLogger``: torch's ``SummaryWriter`` (extra ``loggers``)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from rl_transforms._backends import LOGGERS, require
from rl_transforms.loggers._common import Logger
from rl_transforms.loggers._video import check_video


class TensorboardLogger(Logger):
    """Wrapper for the Tensoarboard logger.

    Events go to ``<log_dir>/<exp_name>`` through
    :class:`torch.utils.tensorboard.SummaryWriter` (needs ``tensorboard``;
    videos also need ``moviepy``: ``pip install 'rl-transforms[loggers]'``).

    Args:
        exp_name (str): the name of the experiment.
        log_dir (str): the parent folder of the experiment. Defaults to ``"tb_logs"``.

    Raises:
        ImportError: if tensorboard is not installed.
    """

    def __init__(self, exp_name: str, log_dir: str = "tb_logs") -> None:
        super().__init__(exp_name=exp_name, log_dir=log_dir)
        self.log_dir = self.experiment.log_dir

    def _create_experiment(self) -> Any:  # Any: a SummaryWriter (optional backend)
        require("tensorboard", owner="TensorboardLogger", extra=LOGGERS)
        writer = require("torch.utils.tensorboard", owner="TensorboardLogger", extra=LOGGERS)
        return writer.SummaryWriter(log_dir=os.path.join(self.log_dir, self.exp_name))

    def log_scalar(self, name: str, value: float, step: int | None = None) -> None:
        """Add one scalar event."""
        self.experiment.add_scalar(name, value, global_step=step)

    def log_video(
        self,
        name: str,
        video: torch.Tensor,
        step: int | None = None,
        **kwargs: Any,  # Any: SummaryWriter.add_video options (fps)
    ) -> None:
        """Add a ``[N, T, C, H, W]`` video event (encoded as a GIF by tensorboard).

        Raises:
            ImportError: if moviepy is not installed.
            TypeError: if ``video`` is not a tensor.
            ValueError: if its layout is not ``[(N,) T, C, H, W]`` with 1 or 3 channels.
        """
        video = check_video(type(self).__name__, name, video)
        require("moviepy", owner="TensorboardLogger.log_video", extra=LOGGERS)
        self.experiment.add_video(tag=name, vid_tensor=video, global_step=step, **kwargs)

    def log_hparams(self, cfg: Mapping[str, Any]) -> None:  # Any: any hyperparameter value
        """Add the hyperparameters (with no metric)."""
        self.experiment.add_hparams(dict(cfg), metric_dict={})

    def log_histogram(
        self,
        name: str,
        data: Sequence | torch.Tensor,
        **kwargs: Any,  # Any: step, bins, walltime
    ) -> None:
        """Add a histogram of ``data``.

        Keyword Args:
            step (int, optional): the global step. Defaults to ``None``.
            bins (str, optional): numpy's binning rule. Defaults to ``"tensorflow"``.
            walltime (float, optional): the event time. Defaults to now.

        Raises:
            TypeError: for any other keyword argument.
        """
        step = kwargs.pop("step", None)
        bins = kwargs.pop("bins", "tensorflow")
        walltime = kwargs.pop("walltime", None)
        if kwargs:
            raise TypeError(
                f"TensorboardLogger.log_histogram got unexpected arguments {sorted(kwargs)}; "
                f"it accepts step, bins and walltime."
            )
        self.experiment.add_histogram(
            tag=name, values=data, global_step=step, bins=bins, walltime=walltime
        )

    def __repr__(self) -> str:
        return f"TensorboardLogger(exp_name={self.exp_name}, log_dir={self.log_dir})"
