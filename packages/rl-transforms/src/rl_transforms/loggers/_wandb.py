"""``WandbLogger``: Weights & Biases runs, online or offline (extra ``loggers``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from rl_transforms._backends import LOGGERS, require
from rl_transforms.loggers._common import Logger
from rl_transforms.loggers._video import check_video


class WandbLogger(Logger):
    """Wrapper for the wandb logger.

    Args:
        exp_name (str): the name of the run.
        offline (bool, optional): log locally only (``wandb sync`` uploads it later).
            Defaults to ``False``.
        save_dir (str, optional): the folder of the run's files. Defaults to wandb's.
        id (str, optional): the run id, to resume a run. Defaults to a new id.
        project (str, optional): the wandb project. Defaults to wandb's default.

    Keyword Args:
        video_fps (int, optional): frames per second of logged videos. Defaults to ``32``.
        **kwargs: passed to ``wandb.init`` (``entity``, ``group``, ``config``, ...).

    Raises:
        ImportError: if wandb is not installed.
    """

    def __init__(
        self,
        exp_name: str,
        offline: bool = False,
        save_dir: str | None = None,
        id: str | None = None,
        project: str | None = None,
        *,
        video_fps: int = 32,
        **kwargs: Any,  # Any: wandb.init options
    ) -> None:
        self.offline = offline
        self.save_dir = save_dir
        self.id = id
        self.project = project
        self.video_fps = video_fps
        self._wandb_kwargs = {
            "name": exp_name,
            "dir": save_dir,
            "id": id,
            "project": project,
            "resume": "allow",
            **({"mode": "offline"} if offline else {}),
            **kwargs,
        }
        super().__init__(exp_name=exp_name, log_dir=save_dir)

    def _create_experiment(self) -> Any:  # Any: a wandb Run (optional backend)
        wandb = require("wandb", owner="WandbLogger", extra=LOGGERS)
        return wandb.init(**self._wandb_kwargs)

    def log_scalar(
        self, name: str, value: float, step: int | None = None, commit: bool = True
    ) -> None:
        """Log ``{name: value}``; ``commit=False`` groups calls into one history row."""
        self.experiment.log({name: value}, step=step, commit=commit)

    def log_video(
        self,
        name: str,
        video: torch.Tensor,
        step: int | None = None,
        **kwargs: Any,  # Any: fps, format, and Run.log options
    ) -> None:
        """Log a ``[N, T, C, H, W]`` video (``fps`` and ``format="mp4"`` may be given).

        Raises:
            TypeError: if ``video`` is not a tensor.
            ValueError: if its layout is not ``[(N,) T, C, H, W]`` with 1 or 3 channels.
        """
        wandb = require("wandb", owner="WandbLogger", extra=LOGGERS)
        video = check_video(type(self).__name__, name, video)
        fps = kwargs.pop("fps", self.video_fps)
        fmt = kwargs.pop("format", "mp4")
        media = wandb.Video(video.numpy(), fps=fps, format=fmt)
        self.experiment.log({name: media}, step=step, **kwargs)

    def log_hparams(self, cfg: Mapping[str, Any]) -> None:  # Any: any hyperparameter value
        """Add ``cfg`` to the run's config."""
        self.experiment.config.update(dict(cfg), allow_val_change=True)

    def log_histogram(
        self,
        name: str,
        data: Sequence | torch.Tensor,
        **kwargs: Any,  # Any: step, bins
    ) -> None:
        """Log a histogram of ``data`` (``step`` and ``bins`` may be given)."""
        wandb = require("wandb", owner="WandbLogger", extra=LOGGERS)
        bins = kwargs.pop("bins", None) or 64
        step = kwargs.pop("step", None)
        if isinstance(data, torch.Tensor):
            data = data.detach().cpu().numpy()
        self.experiment.log({name: wandb.Histogram(data, num_bins=bins)}, step=step, **kwargs)

    def __repr__(self) -> str:
        return f"WandbLogger(exp_name={self.exp_name}, offline={self.offline})"
