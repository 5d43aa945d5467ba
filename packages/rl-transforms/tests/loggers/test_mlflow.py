"""MLFlowLogger on a local file store: metrics, params and video artifacts read back."""

from __future__ import annotations

import pytest
import torch

from rl_transforms.loggers import MLFlowLogger, get_logger

mlflow = pytest.importorskip("mlflow")
pytest.importorskip("av")


@pytest.fixture(autouse=True)
def allow_file_store(monkeypatch):
    # MLflow 3 refuses file stores unless told otherwise; the tests need no server
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")


@pytest.fixture
def logger(tmp_path):
    return MLFlowLogger("exp", tracking_uri=(tmp_path / "mlruns").as_uri())


class TestMLFlowLogger:
    def test_metrics_and_params_are_read_back(self, logger):
        for step in range(3):
            logger.log_scalar("loss", float(step), step=step)
        logger.log_hparams({"lr": 0.1})
        client = mlflow.MlflowClient(tracking_uri=logger.tracking_uri)
        history = client.get_metric_history(logger.run_id, "loss")
        assert [(m.step, m.value) for m in history] == [(0, 0.0), (1, 1.0), (2, 2.0)]
        assert client.get_run(logger.run_id).data.params == {"lr": "0.1"}

    def test_two_loggers_of_one_experiment_get_two_runs(self, tmp_path):
        uri = (tmp_path / "mlruns").as_uri()
        first, second = MLFlowLogger("exp", uri), MLFlowLogger("exp", uri)
        assert first.id == second.id and first.run_id != second.run_id

    def test_video_is_stored_as_an_mp4_artifact(self, logger):
        logger.log_video("clip", torch.zeros(1, 3, 3, 8, 8, dtype=torch.uint8), step=7)
        client = mlflow.MlflowClient(tracking_uri=logger.tracking_uri)
        names = [a.path for a in client.list_artifacts(logger.run_id, "videos")]
        assert names == ["videos/clip_step_0007.mp4"]

    def test_histograms_are_not_supported(self, logger):
        with pytest.raises(NotImplementedError, match="histograms"):
            logger.log_histogram("h", torch.zeros(3))


def test_get_logger_builds_a_file_store_logger(tmp_path):
    logger = get_logger("mlflow", str(tmp_path / "runs"), "exp")
    assert isinstance(logger, MLFlowLogger)
    assert logger.tracking_uri.startswith("file://")
