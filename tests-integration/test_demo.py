"""The README's first command, run as a user runs it: a subprocess, end to end."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("gymnasium")


def test_demo_runs_end_to_end_and_prints_its_summary(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rl_stack",
            "demo",
            "--frames",
            "1024",
            "--no-progress",
            "--output-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    for field in ("frames/s", "samples/s", "checkpoint"):
        assert field in out.stdout
    assert any(tmp_path.iterdir())  # the checkpoint stays where --output-dir put it


def test_demo_failure_is_one_line_and_a_nonzero_exit():
    out = subprocess.run(
        [sys.executable, "-m", "rl_stack", "demo", "--frames", "-5", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    assert out.stderr.strip()
