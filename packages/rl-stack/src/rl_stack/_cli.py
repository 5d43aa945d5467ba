"""The ``rl-stack`` command line: ``demo`` (an end-to-end run), ``versions`` and ``datasets``."""

from __future__ import annotations

import argparse
import sys
import warnings
from importlib import metadata
from pathlib import Path

from rl_datasets.extension import add_datasets_parser, run_datasets_command
from rl_stack._demo import BACKENDS, DemoConfig, DemoError, format_report, run_demo

DISTRIBUTIONS = (
    "rl-specs",
    "rl-envs-core",
    "rl-transforms",
    "rl-batched-envs",
    "rl-replay",
    "rl-datasets",
    "rl-env-adapters",
    "rl-stack",
)
DEMO_DEFAULTS = DemoConfig()


def _installed_versions() -> dict[str, str]:
    versions = {}
    for dist in DISTRIBUTIONS:
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = "not installed"
    return versions


def _print_versions() -> int:
    versions = _installed_versions()
    width = max(map(len, versions))
    for dist, version in versions.items():
        print(f"{dist:<{width}}  {version}")
    return 0 if "not installed" not in versions.values() else 1


def _run_demo(args: argparse.Namespace) -> int:
    try:
        config = DemoConfig(
            frames=args.frames,
            workers=args.workers,
            device=args.device,
            output_dir=args.output_dir,
            backend=args.backend,
            seed=args.seed,
            progress=not args.no_progress,
        )
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=UserWarning, module="gymnasium")
            report = run_demo(config)
    except DemoError as err:
        print(f"rl-stack demo: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("rl-stack demo: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # any other failure: one line too, the traceback with --debug
        if args.debug:
            raise
        message = " ".join(str(err).split())
        print(
            f"rl-stack demo: error: {type(err).__name__}: {message} (rerun with --debug for the traceback)",
            file=sys.stderr,
        )
        return 1
    print(format_report(report, config))
    return 0


def _demo_parser(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser(
        "demo",
        help="an end-to-end run: CartPole envs, transforms, replay buffer, checkpoint",
        description=(
            "Collect CartPole-v1 frames with a random policy through batched, transformed envs, "
            "write them to a memory-mapped replay buffer, sample trajectory slices, then dump "
            "the buffer and load it back into a fresh one. Prints a summary table."
        ),
    )
    d = DEMO_DEFAULTS
    demo.add_argument(
        "--frames", type=int, default=d.frames, help=f"frames to collect (default {d.frames})"
    )
    demo.add_argument(
        "--workers",
        type=int,
        default=d.workers,
        help=f"envs stepped side by side (default {d.workers})",
    )
    demo.add_argument(
        "--device",
        default=d.device,
        help=f"device of env outputs and sampled batches (default {d.device})",
    )
    demo.add_argument(
        "--output-dir",
        type=Path,
        default=None,
        help="keep the storage and checkpoint here (default: a temporary directory, removed)",
    )
    demo.add_argument(
        "--backend",
        choices=BACKENDS,
        default=d.backend,
        help="gym: ParallelEnv of GymEnv workers; envpool: one MultiThreadedEnv (default gym)",
    )
    demo.add_argument(
        "--seed",
        type=int,
        default=d.seed,
        help=f"seed of envs, policy and sampling (default {d.seed})",
    )
    demo.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    demo.add_argument(
        "--debug", action="store_true", help="show the traceback of unexpected errors"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    parser = argparse.ArgumentParser(prog="rl-stack", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("versions", help="print the installed rl-stack distributions and versions")
    _demo_parser(sub)
    add_datasets_parser(sub)
    args = parser.parse_args(argv)
    if args.command == "demo":
        return _run_demo(args)
    if args.command == "datasets":
        return run_datasets_command(args)
    return _print_versions()
