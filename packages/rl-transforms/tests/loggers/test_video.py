"""mp4 files written through PyAV: decoded back, frame count and size compared."""

from __future__ import annotations

import pytest
import torch

from rl_transforms.loggers import CSVLogger
from rl_transforms.loggers._video import write_mp4

av = pytest.importorskip("av")


def decode(path):
    with av.open(str(path)) as container:
        return [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]


@pytest.mark.parametrize(("height", "width"), [(84, 84), (33, 47)])
def test_write_mp4_keeps_frame_count_and_size(tmp_path, height, width):
    frames = torch.zeros(12, height, width, 3, dtype=torch.uint8)
    frames[:, :, :, 0] = torch.arange(12, dtype=torch.uint8).mul(20).view(12, 1, 1)
    write_mp4(tmp_path / "v.mp4", frames, fps=10)
    decoded = decode(tmp_path / "v.mp4")
    assert len(decoded) == 12
    assert decoded[0].shape == (height, width, 3)
    # lossy, but the red ramp survives: frame i is about 20 * i red
    reds = [int(frame[..., 0].mean()) for frame in decoded]
    assert all(abs(red - 20 * i) < 12 for i, red in enumerate(reds))


class TestCSVLoggerMp4:
    def test_video_is_a_playable_mp4(self, tmp_path):
        logger = CSVLogger("exp", log_dir=tmp_path, video_format="mp4", video_fps=15)
        logger.log_video("clip", torch.full((1, 7, 3, 16, 24), 200, dtype=torch.uint8), step=2)
        path = tmp_path / "exp" / "videos" / "clip_2.mp4"
        decoded = decode(path)
        assert len(decoded) == 7 and decoded[0].shape == (16, 24, 3)
        with av.open(str(path)) as container:
            assert container.streams.video[0].average_rate == 15

    def test_gray_videos_are_written_as_rgb(self, tmp_path):
        logger = CSVLogger("exp", log_dir=tmp_path, video_format="mp4")
        logger.log_video("gray", torch.full((1, 3, 1, 8, 8), 128, dtype=torch.uint8))
        decoded = decode(tmp_path / "exp" / "videos" / "gray_0.mp4")
        assert len(decoded) == 3 and decoded[0].shape == (8, 8, 3)
