"""The rl-stack command line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rl_stack._cli import DISTRIBUTIONS, main


def test_versions_lists_every_distribution(capsys):
    assert main(["versions"]) == 0
    out = capsys.readouterr().out
    for dist in DISTRIBUTIONS:
        assert dist in out
    assert "not installed" not in out


def test_unknown_command_exits_with_usage_error():
    with pytest.raises(SystemExit) as excinfo:
        main(["fly"])
    assert excinfo.value.code == 2


def test_module_entry_point_runs():
    out = subprocess.run(
        [sys.executable, "-m", "rl_stack", "versions"], capture_output=True, text=True, check=True
    )
    assert "rl-specs" in out.stdout
