"""The ``rl-stack`` command line: ``demo`` and ``versions``."""

from __future__ import annotations

import argparse
from importlib import metadata

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


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    parser = argparse.ArgumentParser(prog="rl-stack", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("versions", help="print the installed rl-stack distributions and versions")
    sub.add_parser("demo", help="an end-to-end run: envs, transforms, replay buffer, checkpoint")
    args = parser.parse_args(argv)
    if args.command in ("versions", "demo"):
        return _print_versions()
    parser.error(f"unknown command {args.command!r}")
    return 2
