"""``CSVLogger``: scalars as CSV files, videos as ``.pt``, memmap or mp4 files, on disk."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from tensordict import MemoryMappedTensor

from rl_transforms.loggers._common import Logger, no_histograms
from rl_transforms.loggers._video import check_video, write_mp4

VIDEO_FORMATS = ("pt", "memmap", "mp4")


def _make_dir(owner: str, path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(
            f"{owner} cannot write to {str(path)!r}: {err.strerror or err}. Expected a "
            f"directory it can create or write; pass a writable log_dir."
        ) from err


class CSVExperiment:
    """The files of one :class:`CSVLogger` experiment, under ``log_dir``.

    Scalars are appended to ``scalars/<name>.csv`` (one ``step,value`` line per
    call, written and closed at once so no value waits in a buffer), videos go
    to ``videos/<tag>_<step>.<format>`` and texts to ``texts/<tag><step>.txt``.

    Args:
        log_dir (str): the experiment folder (created if missing).

    Keyword Args:
        video_format (str, optional): ``"pt"``, ``"memmap"`` or ``"mp4"``. Defaults to ``"pt"``.
        video_fps (int, optional): frames per second of mp4 videos. Defaults to ``30``.

    Raises:
        ValueError: if ``video_format`` is unknown or ``log_dir`` cannot be written.
    """

    def __init__(self, log_dir: str, *, video_format: str = "pt", video_fps: int = 30) -> None:
        if video_format not in VIDEO_FORMATS:
            raise ValueError(
                f"CSVLogger expected video_format to be one of {VIDEO_FORMATS}, got "
                f"{video_format!r}. Pass video_format='mp4' for playable files."
            )
        self.log_dir = log_dir
        self.video_format = video_format
        self.video_fps = video_fps
        self.scalars: dict[str, list[tuple[int, float]]] = defaultdict(list)
        self.videos_counter: dict[str, int] = defaultdict(int)
        self.text_counter: dict[str, int] = defaultdict(int)
        for sub in ("scalars", "videos", "texts"):
            _make_dir("CSVLogger", Path(log_dir, sub))

    def _file(self, *parts: str) -> Path:
        path = Path(self.log_dir, *parts)
        _make_dir("CSVLogger", path.parent)
        return path

    def add_scalar(self, name: str, value: float, global_step: int | None = None) -> None:
        """Append ``global_step,value`` to ``scalars/<name>.csv``."""
        if global_step is None:
            global_step = len(self.scalars[name])
        value = float(value)
        self.scalars[name].append((global_step, value))
        with open(self._file("scalars", f"{name}.csv"), "a") as file:
            file.write(f"{global_step},{value}\n")

    def add_video(
        self,
        tag: str,
        vid_tensor: torch.Tensor,
        global_step: int | None = None,
        **kwargs: Any,  # Any: mp4 writer options (fps, libx264 options)
    ) -> Path:
        """Write ``vid_tensor`` (``[N, T, C, H, W]`` uint8) and return the file's path."""
        if global_step is None:
            global_step = self.videos_counter[tag]
        self.videos_counter[tag] += 1
        path = self._file("videos", f"{tag}_{global_step}.{self.video_format}")
        if self.video_format == "pt":
            torch.save(vid_tensor, path)
        elif self.video_format == "memmap":
            if path.exists():
                path.unlink()
            MemoryMappedTensor.from_tensor(vid_tensor, filename=path)
        else:
            frames = vid_tensor.flatten(0, 1).permute(0, 2, 3, 1)  # [N*T, H, W, C]
            frames = frames.expand(*frames.shape[:-1], 3)
            fps = kwargs.pop("fps", self.video_fps)
            write_mp4(path, frames, fps=fps, **kwargs)
        return path

    def add_text(self, tag: str, text: str, global_step: int | None = None) -> None:
        """Write ``text`` to ``texts/<tag><step>.txt``."""
        if global_step is None:
            global_step = self.text_counter[tag]
        self.text_counter[tag] += 1
        self._file("texts", f"{tag}{global_step}.txt").write_text(text)

    def __repr__(self) -> str:
        return f"CSVExperiment(log_dir={self.log_dir})"


class CSVLogger(Logger):
    """A minimal-dependency CSV logger.

    Everything lands under ``<log_dir>/<exp_name>/``: scalars in
    ``scalars/<name>.csv``, videos in ``videos/<name>_<step>.<video_format>``
    and hyperparameters in ``texts/hparams0.txt``.

    Args:
        exp_name (str): the name of the experiment.
        log_dir (str or Path, optional): the parent folder of the experiment.
            Defaults to ``"csv_logs"``.
        video_format (str, optional): ``"pt"`` (``torch.save``), ``"memmap"``
            (a :class:`~tensordict.MemoryMappedTensor` file) or ``"mp4"`` (H.264
            through PyAV: ``pip install 'rl-transforms[video]'``). Defaults to ``"pt"``.
        video_fps (int, optional): frames per second of mp4 videos. Defaults to ``30``.

    Raises:
        ValueError: if ``video_format`` is unknown or the folder cannot be written.

    Examples:
        >>> import tempfile, torch
        >>> from pathlib import Path
        >>> root = tempfile.mkdtemp()
        >>> logger = CSVLogger("exp", log_dir=root)
        >>> logger.log_scalar("loss", 0.5, step=0)
        >>> logger.log_scalar("loss", 0.25, step=1)
        >>> print(Path(root, "exp", "scalars", "loss.csv").read_text(), end="")
        0,0.5
        1,0.25
        >>> logger.log_video("rollout", torch.zeros(1, 4, 3, 8, 8, dtype=torch.uint8))
        >>> torch.load(Path(root, "exp", "videos", "rollout_0.pt")).shape
        torch.Size([1, 4, 3, 8, 8])
    """

    experiment: CSVExperiment

    def __init__(
        self,
        exp_name: str,
        log_dir: str | os.PathLike | None = None,
        video_format: str = "pt",
        video_fps: int = 30,
    ) -> None:
        self.video_format = video_format
        self.video_fps = video_fps
        super().__init__(exp_name=exp_name, log_dir=os.fspath(log_dir or "csv_logs"))

    def _create_experiment(self) -> CSVExperiment:
        return CSVExperiment(
            os.path.join(self.log_dir, self.exp_name),
            video_format=self.video_format,
            video_fps=self.video_fps,
        )

    def log_scalar(self, name: str, value: float, step: int | None = None) -> None:
        """Append ``step,value`` to ``scalars/<name>.csv`` (step: a counter by default)."""
        self.experiment.add_scalar(name, value, global_step=step)

    def log_video(
        self,
        name: str,
        video: torch.Tensor,
        step: int | None = None,
        **kwargs: Any,  # Any: mp4 writer options
    ) -> None:
        """Write a ``[N, T, C, H, W]`` (or ``[T, C, H, W]``) video, C in (1, 3).

        With ``video_format="mp4"``, ``fps`` and libx264 options (``crf="23"``, ...)
        may be passed as keyword arguments.

        Raises:
            TypeError: if ``video`` is not a tensor.
            ValueError: if its layout is not ``[(N,) T, C, H, W]`` with 1 or 3 channels.
        """
        video = check_video(type(self).__name__, name, video)
        self.experiment.add_video(tag=name, vid_tensor=video, global_step=step, **kwargs)

    def log_hparams(self, cfg: Mapping[str, Any]) -> None:  # Any: any hyperparameter value
        """Write ``cfg`` as ``key: value`` lines to ``texts/hparams<n>.txt``."""
        text = "\n".join(f"{key}: {value}" for key, value in sorted(cfg.items()))
        self.experiment.add_text("hparams", text)

    def log_histogram(
        self,
        name: str,
        data: Sequence | torch.Tensor,
        **kwargs: Any,  # Any: unused backend options
    ) -> None:
        """Not available: a CSV file holds no histograms.

        Raises:
            NotImplementedError: always.
        """
        raise no_histograms("CSVLogger", name)

    def __repr__(self) -> str:
        return f"CSVLogger(exp_name={self.exp_name}, experiment={self.experiment!r})"
