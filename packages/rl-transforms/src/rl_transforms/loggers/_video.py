"""Video tensors for the loggers: layout checks and mp4 files written through PyAV."""

from __future__ import annotations

import os

import torch

from rl_transforms._backends import VIDEO, require


def check_video(owner: str, name: str, video: torch.Tensor) -> torch.Tensor:
    """Return ``video`` as ``[N, T, C, H, W]`` uint8 (C in {1, 3}), or raise a clear error.

    A ``[T, C, H, W]`` video is taken as one video (``N = 1``).

    Raises:
        TypeError: if ``video`` is not a tensor.
        ValueError: if its layout is not ``[(N,) T, C, H, W]`` with 1 or 3 channels.
    """
    if not isinstance(video, torch.Tensor):
        raise TypeError(
            f"{owner}.log_video expected the video {name!r} to be a torch.Tensor, got "
            f"{type(video).__name__}. Stack the frames with torch.stack first."
        )
    if video.ndim == 4:
        video = video.unsqueeze(0)
    if video.ndim != 5 or video.shape[2] not in (1, 3):
        raise ValueError(
            f"{owner}.log_video expected the video {name!r} as [N, T, C, H, W] (or "
            f"[T, C, H, W]) with C in (1, 3), got shape {tuple(video.shape)}. Permute the "
            f"frames to channels-first, e.g. video.permute(0, 1, 4, 2, 3) for [N, T, H, W, C]."
        )
    if video.dtype != torch.uint8:
        if video.is_floating_point() and float(video.max()) <= 1.0:
            video = video * 255
        video = video.clamp(0, 255).to(torch.uint8)
    return video


def write_mp4(path: str | os.PathLike, frames: torch.Tensor, *, fps: int, **options: str) -> None:
    """Write ``frames`` (``[T, H, W, 3]`` uint8) as an H.264 mp4 file at ``path``.

    Frames of even width and height use the ``yuv420p`` pixel format that every
    player reads; odd sizes, which 4:2:0 chroma cannot hold, use ``yuv444p`` so the
    decoded frames keep the recorded size.

    Raises:
        ImportError: when PyAV is not installed (extra ``video``).
    """
    av = require("av", owner="Writing mp4 videos", extra=VIDEO)
    frames = frames.detach().to("cpu", torch.uint8).contiguous().numpy()
    height, width = frames.shape[1:3]
    with av.open(os.fspath(path), mode="w") as container:
        stream = container.add_stream("libx264", rate=int(fps), options=options or None)
        stream.width, stream.height = width, height
        stream.pix_fmt = "yuv420p" if height % 2 == 0 and width % 2 == 0 else "yuv444p"
        for frame in frames:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        container.mux(stream.encode())
