"""Recorders, as ``torchrl.record.recorder``: re-exports only."""

from __future__ import annotations

from rl_transforms import PixelRenderTransform, TensorDictRecorder, VideoRecorder

__all__ = ["PixelRenderTransform", "TensorDictRecorder", "VideoRecorder"]
