"""CSVLogger: scalars, texts and videos written under <log_dir>/<exp_name>."""

from __future__ import annotations

import sys

import pytest
import torch
from tensordict import MemoryMappedTensor

from rl_transforms.loggers import CSVLogger


class TestCSVLogger:
    def test_scalars_are_appended_as_step_value_lines(self, tmp_path):
        logger = CSVLogger("exp", log_dir=tmp_path)
        for step, value in enumerate([0.5, 1.5, -2.0]):
            logger.log_scalar("loss", value, step=step * 10)
        lines = (tmp_path / "exp" / "scalars" / "loss.csv").read_text().splitlines()
        assert lines == ["0,0.5", "10,1.5", "20,-2.0"]

    def test_scalar_without_step_counts_calls(self, tmp_path):
        logger = CSVLogger("exp", log_dir=tmp_path)
        logger.log_scalar("r", 1.0)
        logger.log_scalar("r", 2.0)
        lines = (tmp_path / "exp" / "scalars" / "r.csv").read_text().splitlines()
        assert [line.split(",")[0] for line in lines] == ["0", "1"]

    def test_scalars_survive_a_new_logger_on_the_same_folder(self, tmp_path):
        CSVLogger("exp", log_dir=tmp_path).log_scalar("x", 1.0, step=0)
        CSVLogger("exp", log_dir=tmp_path).log_scalar("x", 2.0, step=1)
        lines = (tmp_path / "exp" / "scalars" / "x.csv").read_text().splitlines()
        assert lines == ["0,1.0", "1,2.0"]

    def test_hparams_are_written_sorted(self, tmp_path):
        logger = CSVLogger("exp", log_dir=tmp_path)
        logger.log_hparams({"lr": 0.1, "batch": 32})
        text = (tmp_path / "exp" / "texts" / "hparams0.txt").read_text()
        assert text.splitlines() == ["batch: 32", "lr: 0.1"]

    @pytest.mark.parametrize("video_format", ["pt", "memmap"])
    def test_video_is_saved_in_the_chosen_format(self, tmp_path, video_format):
        logger = CSVLogger("exp", log_dir=tmp_path, video_format=video_format)
        video = torch.randint(0, 255, (1, 5, 3, 6, 8), dtype=torch.uint8)
        logger.log_video("clip", video, step=4)
        path = tmp_path / "exp" / "videos" / f"clip_4.{video_format}"
        if video_format == "pt":
            loaded = torch.load(path, weights_only=True)
        else:
            loaded = MemoryMappedTensor.from_filename(path, dtype=torch.uint8, shape=video.shape)
        assert torch.equal(loaded, video)

    def test_four_dim_video_is_one_video(self, tmp_path):
        logger = CSVLogger("exp", log_dir=tmp_path)
        logger.log_video("clip", torch.zeros(5, 1, 4, 4, dtype=torch.uint8))
        saved = torch.load(tmp_path / "exp" / "videos" / "clip_0.pt", weights_only=True)
        assert saved.shape == (1, 5, 1, 4, 4)

    @pytest.mark.parametrize("shape", [(1, 5, 6, 8, 3), (5, 6), (1, 1, 5, 2, 6, 8)])
    def test_video_with_a_wrong_layout_names_the_shape(self, tmp_path, shape):
        logger = CSVLogger("exp", log_dir=tmp_path)
        with pytest.raises(ValueError, match=r"'clip'.*\[N, T, C, H, W\].*" + str(shape[0])):
            logger.log_video("clip", torch.zeros(shape, dtype=torch.uint8))

    def test_video_that_is_not_a_tensor_is_rejected(self, tmp_path):
        with pytest.raises(TypeError, match=r"torch\.Tensor"):
            CSVLogger("exp", log_dir=tmp_path).log_video("clip", [[0]])

    def test_unknown_video_format_is_rejected(self, tmp_path):
        with pytest.raises(ValueError, match="'gif'"):
            CSVLogger("exp", log_dir=tmp_path, video_format="gif")

    def test_a_folder_that_cannot_be_created_is_reported(self, tmp_path):
        blocker = tmp_path / "file"
        blocker.write_text("not a folder")
        with pytest.raises(ValueError, match=r"cannot write to .*file"):
            CSVLogger("exp", log_dir=blocker)

    def test_histograms_are_not_supported(self, tmp_path):
        with pytest.raises(NotImplementedError, match="histograms"):
            CSVLogger("exp", log_dir=tmp_path).log_histogram("h", torch.zeros(3))

    def test_mp4_without_pyav_names_the_extra(self, tmp_path, monkeypatch):
        monkeypatch.setitem(sys.modules, "av", None)  # import av now raises ImportError
        logger = CSVLogger("exp", log_dir=tmp_path, video_format="mp4")
        with pytest.raises(ImportError, match=r"rl-transforms\[video\]"):
            logger.log_video("clip", torch.zeros(1, 2, 3, 4, 4, dtype=torch.uint8))
