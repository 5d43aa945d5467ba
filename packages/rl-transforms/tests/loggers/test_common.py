"""Logger: the base class's shared behaviour (log_metrics, exp_name checks)."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_transforms.loggers import Logger


class RecordingLogger(Logger):
    def _create_experiment(self):
        return []

    def log_scalar(self, name, value, step=None):
        self.experiment.append((name, value, step))

    def log_video(self, name, video, step=None, **kwargs):
        raise NotImplementedError

    def log_hparams(self, cfg):
        raise NotImplementedError

    def log_histogram(self, name, data, **kwargs):
        raise NotImplementedError

    def __repr__(self):
        return "RecordingLogger()"


class TestLogger:
    def test_log_metrics_flattens_nested_tensordict_keys(self):
        logger = RecordingLogger("exp", "unused")
        metrics = TensorDict({"loss": {"actor": torch.tensor(1.5)}, "steps": torch.tensor(3)})
        out = logger.log_metrics(metrics, step=7, keys_sep=".")
        assert out == {"loss.actor": 1.5, "steps": 3}
        assert sorted(logger.experiment) == [("loss.actor", 1.5, 7), ("steps", 3, 7)]

    def test_log_metrics_turns_tensors_into_python_values(self):
        logger = RecordingLogger("exp", "unused")
        out = logger.log_metrics({"vec": torch.tensor([1.0, 2.0]), "lr": 0.1})
        assert out == {"vec": [1.0, 2.0], "lr": 0.1}

    @pytest.mark.parametrize("name", ["", None, 3])
    def test_bad_exp_name_is_rejected(self, name):
        with pytest.raises(ValueError, match="exp_name"):
            RecordingLogger(name, "unused")

    def test_abstract_methods_must_be_implemented(self):
        class Incomplete(Logger):
            def _create_experiment(self):
                return None

        with pytest.raises(TypeError):
            Incomplete("exp", "unused")
