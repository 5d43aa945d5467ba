"""get_logger and generate_exp_name."""

from __future__ import annotations

import re

import pytest

from rl_transforms.loggers import CSVLogger, generate_exp_name, get_logger


def test_generate_exp_name_is_unique_and_formatted():
    names = {generate_exp_name("SAC", "cheetah") for _ in range(5)}
    assert len(names) == 5
    pattern = r"SAC_cheetah_[0-9a-f]{8}_\d{2}_\d{2}_\d{2}-\d{2}_\d{2}_\d{2}"
    assert all(re.fullmatch(pattern, name) for name in names)


def test_get_logger_csv_writes_mp4_videos(tmp_path):
    logger = get_logger("csv", str(tmp_path), "run")
    assert isinstance(logger, CSVLogger)
    assert logger.video_format == "mp4"
    assert (tmp_path / "run" / "scalars").is_dir()


@pytest.mark.parametrize("logger_type", ["", None])
def test_get_logger_without_type_is_none(logger_type):
    assert get_logger(logger_type, "unused", "run") is None


def test_get_logger_rejects_unknown_types():
    with pytest.raises(ValueError, match="'visdom'"):
        get_logger("visdom", "unused", "run")
