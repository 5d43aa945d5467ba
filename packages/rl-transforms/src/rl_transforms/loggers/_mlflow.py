"""``MLFlowLogger``: MLflow runs in a tracking store (extra ``loggers``)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from rl_transforms._backends import LOGGERS, require
from rl_transforms.loggers._common import Logger, no_histograms
from rl_transforms.loggers._video import check_video, write_mp4


class MLFlowLogger(Logger):
    """Wrapper for the mlflow logger.

    Each logger starts one run of the experiment ``exp_name`` (created if missing)
    in the tracking store at ``tracking_uri``. Videos are stored as mp4 artifacts
    under ``videos/`` (PyAV, extra ``video``).

    Args:
        exp_name (str): the name of the MLflow experiment.
        tracking_uri (str): the tracking store, e.g. ``"sqlite:///mlflow.db"``, a server
            address or ``"file:///path/mlruns"`` (MLflow 3 accepts file stores only with
            ``MLFLOW_ALLOW_FILE_STORE=true`` in the environment).
        tags (dict, optional): tags of the experiment. Defaults to ``None``.

    Keyword Args:
        artifact_location (str, optional): where artifacts go. Defaults to
            ``tracking_uri`` for a ``file:`` store, else the server's choice.
        video_fps (int, optional): frames per second of logged videos. Defaults to ``30``.
        **kwargs: passed to ``mlflow.create_experiment``.

    Raises:
        ImportError: if mlflow (or mlflow-skinny) is not installed.
    """

    def __init__(
        self,
        exp_name: str,
        tracking_uri: str,
        tags: dict[str, Any] | None = None,  # Any: tag values
        *,
        artifact_location: str | None = None,
        video_fps: int = 30,
        **kwargs: Any,  # Any: mlflow.create_experiment options
    ) -> None:
        if artifact_location is None and tracking_uri.startswith("file:"):
            artifact_location = tracking_uri
        self.tracking_uri = tracking_uri
        self.video_fps = video_fps
        self._create_kwargs = {
            "name": exp_name,
            "artifact_location": artifact_location,
            "tags": tags,
            **kwargs,
        }
        self.id: str | None = None
        super().__init__(exp_name=exp_name, log_dir=tracking_uri)

    def _create_experiment(self) -> Any:  # Any: an mlflow Run
        # a client bound to this store and run: two loggers never share mlflow's global run
        mlflow = require("mlflow", owner="MLFlowLogger", extra=LOGGERS)
        self._client = mlflow.MlflowClient(tracking_uri=self.tracking_uri)
        existing = self._client.get_experiment_by_name(self.exp_name)
        if existing is None:
            self.id = self._client.create_experiment(**self._create_kwargs)
        else:
            self.id = existing.experiment_id
        return self._client.create_run(self.id)

    @property
    def run_id(self) -> str:
        """The id of this logger's MLflow run."""
        return self.experiment.info.run_id

    def log_scalar(self, name: str, value: float, step: int | None = None) -> None:
        """Log the metric ``name`` at ``step`` (``0`` when ``None``)."""
        self._client.log_metric(self.run_id, name, float(value), step=step or 0)

    def log_video(
        self,
        name: str,
        video: torch.Tensor,
        step: int | None = None,
        **kwargs: Any,  # Any: fps and libx264 options
    ) -> None:
        """Store the last video of a ``[N, T, C, H, W]`` batch as ``videos/<name>[_step_<step>].mp4``.

        Raises:
            TypeError: if ``video`` is not a tensor.
            ValueError: if its layout is not ``[(N,) T, C, H, W]`` with 1 or 3 channels.
        """
        video = check_video(type(self).__name__, name, video)[-1]  # [T, C, H, W]
        frames = video.permute(0, 2, 3, 1)
        frames = frames.expand(*frames.shape[:-1], 3)
        fps = kwargs.pop("fps", self.video_fps)
        file_name = f"{name}_step_{step:04}.mp4" if step is not None else f"{name}.mp4"
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, file_name)
            write_mp4(path, frames, fps=fps, **kwargs)
            self._client.log_artifact(self.run_id, path, "videos")

    def log_hparams(self, cfg: Mapping[str, Any]) -> None:  # Any: any hyperparameter value
        """Log ``cfg`` as the run's parameters."""
        for key, value in cfg.items():
            self._client.log_param(self.run_id, key, value)

    def log_histogram(
        self,
        name: str,
        data: Sequence | torch.Tensor,
        **kwargs: Any,  # Any: unused backend options
    ) -> None:
        """Not available: MLflow has no histogram metric.

        Raises:
            NotImplementedError: always.
        """
        raise no_histograms("MLFlowLogger", name)

    def __repr__(self) -> str:
        return f"MLFlowLogger(exp_name={self.exp_name}, tracking_uri={self.tracking_uri})"
