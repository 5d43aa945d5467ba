"""WandbLogger in offline mode: the run's files are written locally."""

from __future__ import annotations

import pytest
import torch

from rl_transforms.loggers import WandbLogger, get_logger

pytest.importorskip("wandb")


@pytest.fixture
def logger(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_SILENT", "true")
    logger = WandbLogger("exp", offline=True, save_dir=str(tmp_path), project="rl-stack-tests")
    yield logger
    logger.experiment.finish()


class TestWandbLogger:
    def test_offline_run_writes_its_history_locally(self, logger, tmp_path):
        logger.log_scalar("loss", 0.5, step=0)
        logger.log_scalar("loss", 0.25, step=1)
        logger.log_hparams({"lr": 0.1})
        assert logger.experiment.config["lr"] == 0.1
        assert logger.experiment.name == "exp"
        logger.experiment.finish()
        assert list(tmp_path.rglob("*.wandb")), "the offline run file is missing"

    def test_histogram_and_metrics(self, logger):
        logger.log_histogram("w", torch.arange(5.0), step=2)
        assert logger.log_metrics({"a": torch.tensor(1.0)}, step=3) == {"a": 1.0}

    def test_video_layout_is_checked(self, logger):
        with pytest.raises(ValueError, match=r"\[N, T, C, H, W\]"):
            logger.log_video("clip", torch.zeros(2, 8, 8, 3, dtype=torch.uint8))


def test_get_logger_builds_a_wandb_logger(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_SILENT", "true")
    logger = get_logger("wandb", str(tmp_path), "run", wandb_kwargs={"offline": True})
    try:
        assert isinstance(logger, WandbLogger) and logger.save_dir == str(tmp_path)
    finally:
        logger.experiment.finish()
