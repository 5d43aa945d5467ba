"""TensorboardLogger: events written by SummaryWriter, read back with tensorboard."""

from __future__ import annotations

import pytest
import torch

from rl_transforms.loggers import TensorboardLogger

pytest.importorskip("tensorboard")
pytest.importorskip("moviepy")
event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")


def read_events(logger):
    logger.experiment.flush()
    acc = event_accumulator.EventAccumulator(logger.log_dir, size_guidance={"histograms": 0})
    acc.Reload()
    return acc


class TestTensorboardLogger:
    def test_log_dir_is_the_experiment_folder(self, tmp_path):
        logger = TensorboardLogger("exp", log_dir=str(tmp_path))
        assert logger.log_dir == str(tmp_path / "exp")

    def test_scalars_are_read_back(self, tmp_path):
        logger = TensorboardLogger("exp", log_dir=str(tmp_path))
        for step in range(3):
            logger.log_scalar("loss", 1.0 / (step + 1), step=step)
        events = read_events(logger).Scalars("loss")
        assert [e.step for e in events] == [0, 1, 2]
        assert [round(e.value, 4) for e in events] == [1.0, 0.5, 0.3333]

    def test_histogram_is_read_back(self, tmp_path):
        logger = TensorboardLogger("exp", log_dir=str(tmp_path))
        logger.log_histogram("weights", torch.arange(10.0), step=5, bins="auto")
        (event,) = read_events(logger).Histograms("weights")
        assert event.step == 5 and event.histogram_value.num == 10

    def test_histogram_rejects_unknown_options(self, tmp_path):
        logger = TensorboardLogger("exp", log_dir=str(tmp_path))
        with pytest.raises(TypeError, match="colour"):
            logger.log_histogram("w", torch.zeros(3), colour="red")

    def test_video_is_an_image_event(self, tmp_path):
        logger = TensorboardLogger("exp", log_dir=str(tmp_path))
        logger.log_video("clip", torch.zeros(1, 4, 3, 8, 8, dtype=torch.uint8), step=1)
        (event,) = read_events(logger).Images("clip")
        assert (event.width, event.height, event.step) == (8, 8, 1)

    def test_hparams_are_written(self, tmp_path):
        logger = TensorboardLogger("exp", log_dir=str(tmp_path))
        logger.log_hparams({"lr": 0.1})
        logger.experiment.flush()
        assert any(p.name.startswith("events") for p in (tmp_path / "exp").rglob("*"))
