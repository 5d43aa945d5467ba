"""Run every benchmark side by side: ours here, the peers in the peer venv.

``python -m benchmarks [--only TEXT] [--device cpu|cuda] [--repeats N] [--no-peers]``
(``nox -s bench -- ARGS`` passes ARGS here). Each ``benchmarks/<dist>/bench_*.py`` runs
once in this interpreter (``rl_stack`` and the plain-torch ``floor``) and once in the
peer venv (TorchRL 0.14 and the raw libraries), then one table per workload shows the
median, min and max rate of each library and the ratio ours/peer (above 1: we are faster).
Rows are written to ``benchmarks/results/<file>.json`` and the tables of every stored
file to ``benchmarks/results/latest.md`` (``--report-only`` rebuilds it without running).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
PEER_VENV = ROOT / ".peer-venv"
PEER_REQUIREMENTS = HERE / "peer-requirements.txt"
OURS = "rl_stack"
LOCAL_LIBS = "rl_stack,floor"
PEER_LIBS = "torchrl,gymnasium,envpool,cpprb,sb3"


def _peer_python() -> Path:
    """Build (or reuse) the peer venv from peer-requirements.txt; return its python."""
    python = PEER_VENV / "bin" / "python"
    stamp = PEER_VENV / ".requirements-sha256"
    digest = hashlib.sha256(PEER_REQUIREMENTS.read_bytes()).hexdigest()
    if python.exists() and stamp.exists() and stamp.read_text() == digest:
        return python
    subprocess.run(["uv", "venv", "--quiet", "--clear", "-p", "3.11", str(PEER_VENV)], check=True)
    env = {**os.environ, "VIRTUAL_ENV": str(PEER_VENV)}
    subprocess.run(["uv", "pip", "install", "-r", str(PEER_REQUIREMENTS)], check=True, env=env)
    stamp.write_text(digest)
    return python


def _run_file(python: Path, path: Path, libs: str, args: argparse.Namespace) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rows.json"
        cmd = [
            str(python),
            str(path),
            "--libs",
            libs,
            "--device",
            args.device,
            "--repeats",
            str(args.repeats),
            "--min-time",
            str(args.min_time),
            "--only",
            args.only,
            "--json",
            str(out),
        ]
        # ours keeps the caller's PYTHONPATH (a worktree's sources); the peer venv sees only ours
        paths = [str(HERE)]
        if python == Path(sys.executable) and os.environ.get("PYTHONPATH"):
            paths.append(os.environ["PYTHONPATH"])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not out.exists():
            reason = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            print(f"!! {path.name} failed under {python}: {reason}", file=sys.stderr)
            return []
        return json.loads(out.read_text())


def _format(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:,.2f}"


def _table(rows: list[dict]) -> str:
    ours = next((r for r in rows if r["lib"] == OURS and "median" in r), None)
    lines = [
        f"| library | median {rows[0]['unit']} | min | max | µs/item | ours/lib |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in sorted(rows, key=lambda r: (r["lib"] != OURS, r["lib"])):
        if "median" not in row:
            lines.append(f"| {row['lib']} | n/a: {row['error']} | | | | |")
            continue
        ratio = "" if ours is None or row is ours else f"{ours['median'] / row['median']:.2f}x"
        cells = [_format(row[k]) for k in ("median", "min", "max")]
        lines.append(
            f"| {row['lib']} | {' | '.join(cells)} | {1e6 / row['median']:.2f} | {ratio} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--only", default="", help="substring of the workload names to run")
    parser.add_argument("--files", default="", help="substring of the benchmark file paths")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=0.2)
    parser.add_argument("--no-peers", action="store_true", help="time rl_stack and floor only")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="rebuild results/latest.md from the stored results/*.json without running",
    )
    args = parser.parse_args(argv)

    files = sorted(p for p in HERE.glob("*/bench_*.py") if args.files in str(p))
    RESULTS.mkdir(exist_ok=True)
    if not args.report_only:
        peer = None if args.no_peers else _peer_python()
        for path in files:
            rows = _run_file(Path(sys.executable), path, LOCAL_LIBS, args)
            if peer is not None:
                rows += _run_file(peer, path, PEER_LIBS, args)
            (RESULTS / f"{path.parent.name}.{path.stem}.json").write_text(
                json.dumps(rows, indent=1)
            )
    report = []
    for path in files:
        stored = RESULTS / f"{path.parent.name}.{path.stem}.json"
        if not stored.exists():
            continue
        rows = json.loads(stored.read_text())
        for name in dict.fromkeys(r["workload"] for r in rows):
            table = _table([r for r in rows if r["workload"] == name])
            device = next(r["device"] for r in rows if r["workload"] == name)
            section = f"### {stored.stem}: {name} ({device})\n\n{table}\n"
            print(section)
            report.append(section)
    (RESULTS / "latest.md").write_text("\n".join(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
