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


class TestDemoCommand:
    def test_runs_and_prints_the_summary(self, capsys, tmp_path):
        pytest.importorskip("gymnasium", reason="the gym backend is not installed")
        code = main(
            [
                "demo",
                "--frames",
                "64",
                "--no-progress",
                "--seed",
                "1",
                "--output-dir",
                str(tmp_path),
            ]
        )
        out = capsys.readouterr().out
        assert code == 0
        for line in (
            "frames/s",
            "samples/s",
            "episodes finished",
            "checkpoint size on disk",
            "checkpoint load time",
        ):
            assert line in out
        assert "64 elements identical, same samples under seed 1" in out
        assert (tmp_path / "checkpoint").is_dir()

    @pytest.mark.parametrize(
        ("argv", "message"),
        [
            (["--frames", "0"], "--frames must be a positive int, got 0."),
            (["--device", "nowhere"], "--device expects a torch device"),
        ],
    )
    def test_bad_option_exits_one_with_one_line(self, capsys, argv, message):
        assert main(["demo", *argv]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert err.startswith("rl-stack demo: error: ") and message in err

    def test_missing_envpool_exits_one_with_the_install_line(self, capsys, monkeypatch):
        monkeypatch.setitem(sys.modules, "envpool", None)
        assert main(["demo", "--backend", "envpool", "--frames", "64"]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert "pip install 'rl-env-adapters[envpool]'" in err
        assert "Traceback" not in err

    def test_unexpected_failure_is_one_line_unless_debug(self, capsys, monkeypatch):
        def broken(config):
            raise OSError("disk full\nsecond line")

        monkeypatch.setattr("rl_stack._cli.run_demo", broken)
        assert main(["demo"]) == 1
        err = capsys.readouterr().err
        assert (
            err
            == "rl-stack demo: error: OSError: disk full second line (rerun with --debug for the traceback)\n"
        )
        with pytest.raises(OSError, match="disk full"):
            main(["demo", "--debug"])

    def test_interrupt_exits_130_without_traceback(self, capsys, monkeypatch):
        def interrupted(config):
            raise KeyboardInterrupt

        monkeypatch.setattr("rl_stack._cli.run_demo", interrupted)
        assert main(["demo"]) == 130
        assert capsys.readouterr().err == "rl-stack demo: interrupted\n"

    def test_unknown_backend_is_a_usage_error(self):
        with pytest.raises(SystemExit) as excinfo:
            main(["demo", "--backend", "mujoco"])
        assert excinfo.value.code == 2


class TestDatasetsCommand:
    def test_list_names_every_source(self, capsys):
        assert main(["datasets", "list"]) == 0
        out = capsys.readouterr().out
        for source in (
            "d4rl",
            "minari",
            "atari_dqn",
            "openml",
            "openx",
            "roboset",
            "vd4rl",
            "gen_dgrl",
        ):
            assert source in out

    def test_list_of_a_source_marks_converted_ids(self, capsys, tmp_path):
        converted = tmp_path / "hopper-medium-v2"
        converted.mkdir()
        (converted / ".complete").write_text("complete\n")
        assert main(["datasets", "list", "d4rl", "--root", str(tmp_path)]) == 0
        out = capsys.readouterr().out
        assert "d4rl:hopper-medium-v2  [converted]" in out
        assert "d4rl:walker2d-medium-v2\n" in out

    def test_info_says_where_and_whether_converted(self, capsys, tmp_path):
        assert main(["datasets", "info", "d4rl:hopper-medium-v2", "--root", str(tmp_path)]) == 0
        out = capsys.readouterr().out
        assert str(tmp_path / "hopper-medium-v2") in out and "converted   no" in out

    @pytest.mark.parametrize(
        ("reference", "message"),
        [("hopper", "SOURCE:ID"), ("d4rl:hoper-medium-v2", "Did you mean: 'hopper-medium-v2'")],
    )
    def test_bad_reference_is_one_line(self, capsys, reference, message):
        assert main(["datasets", "info", reference]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err
