"""What rl-stack's command line needs from rl-datasets: the ``datasets`` subcommand.

``rl-stack datasets list [SOURCE]``, ``rl-stack datasets info SOURCE:ID`` and
``rl-stack datasets download SOURCE:ID`` list the registries, describe where a dataset
is (or would be) stored and whether it is converted, and download and convert one.
"""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path
from typing import Any

from rl_datasets import _paths
from rl_datasets._atari_dqn import AtariDQNExperienceReplay
from rl_datasets._base import BaseDatasetExperienceReplay
from rl_datasets._d4rl import D4RLExperienceReplay
from rl_datasets._gen_dgrl import GenDGRLExperienceReplay
from rl_datasets._ids import check_dataset_id
from rl_datasets._minari import MinariExperienceReplay
from rl_datasets._openml import OpenMLExperienceReplay
from rl_datasets._openx import OpenXExperienceReplay
from rl_datasets._roboset import RobosetExperienceReplay
from rl_datasets._vd4rl import VD4RLExperienceReplay

__all__ = ["SOURCES", "add_datasets_parser", "run_datasets_command"]

#: the ``SOURCE`` prefix of a dataset reference -> its class
SOURCES: dict[str, type[BaseDatasetExperienceReplay]] = {
    "atari_dqn": AtariDQNExperienceReplay,
    "d4rl": D4RLExperienceReplay,
    "gen_dgrl": GenDGRLExperienceReplay,
    "minari": MinariExperienceReplay,
    "openml": OpenMLExperienceReplay,
    "openx": OpenXExperienceReplay,
    "roboset": RobosetExperienceReplay,
    "vd4rl": VD4RLExperienceReplay,
}


def add_datasets_parser(sub: argparse._SubParsersAction) -> None:
    """Add the ``datasets`` subcommand to an argparse sub-parsers object."""
    parser = sub.add_parser(
        "datasets",
        help="list, describe and download the offline datasets",
        description="Offline datasets are named SOURCE:ID, e.g. d4rl:hopper-medium-v2.",
    )
    actions = parser.add_subparsers(dest="datasets_command", required=True)
    listing = actions.add_parser("list", help="the sources, or the ids of one source")
    listing.add_argument("source", nargs="?", choices=sorted(SOURCES))
    listing.add_argument("--root", type=Path, default=None, help="the datasets' root folder")
    info = actions.add_parser("info", help="where a dataset is stored and whether it is converted")
    info.add_argument("dataset", metavar="SOURCE:ID")
    info.add_argument("--root", type=Path, default=None, help="the datasets' root folder")
    download = actions.add_parser("download", help="download and convert a dataset")
    download.add_argument("dataset", metavar="SOURCE:ID")
    download.add_argument("--root", type=Path, default=None, help="the datasets' root folder")
    download.add_argument("--force", action="store_true", help="download and convert again")


def run_datasets_command(args: argparse.Namespace) -> int:
    """Run a parsed ``datasets`` command; return the exit code (errors are one line)."""
    try:
        if args.datasets_command == "list":
            _list(args.source, args.root)
        elif args.datasets_command == "info":
            _info(*_resolve(args.dataset), args.root)
        else:
            _download(*_resolve(args.dataset), args.root, args.force)
    except (ValueError, KeyError, TypeError, OSError, ImportError, RuntimeError) as err:
        message = " ".join(str(err).split())
        print(f"rl-stack datasets: error: {type(err).__name__}: {message}", file=sys.stderr)
        return 1
    return 0


def _resolve(reference: str) -> tuple[type[BaseDatasetExperienceReplay], str]:
    source, sep, dataset_id = reference.partition(":")
    if not sep or source not in SOURCES:
        raise ValueError(
            f"expected a dataset named SOURCE:ID with SOURCE in {sorted(SOURCES)}, got "
            f"{reference!r}. Run 'rl-stack datasets list' for the sources."
        )
    cls = SOURCES[source]
    check_dataset_id(cls.__name__, dataset_id, cls.available_datasets)
    return cls, dataset_id


def _path(cls: type[BaseDatasetExperienceReplay], dataset_id: str, root: Path | None) -> Path:
    return (root if root is not None else _paths.default_root(cls._source)) / dataset_id


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def _list(source: str | None, root: Path | None) -> None:
    if source is None:
        width = max(map(len, SOURCES))
        for name, cls in SOURCES.items():
            folder = root if root is not None else _paths.default_root(cls._source)
            print(
                f"{name:<{width}}  {cls.__name__:<26} {len(cls.available_datasets):>4} ids  {folder}"
            )
        return
    cls = SOURCES[source]
    for dataset_id in cls.available_datasets:
        converted = _paths.is_complete(_path(cls, dataset_id, root))
        print(f"{source}:{dataset_id}{'  [converted]' if converted else ''}")


def _info(cls: type[BaseDatasetExperienceReplay], dataset_id: str, root: Path | None) -> None:
    path = _path(cls, dataset_id, root)
    converted = _paths.is_complete(path)
    state = "yes" if converted else ("interrupted (no marker)" if path.exists() else "no")
    print(f"dataset     {dataset_id}")
    print(f"class       {cls.__name__}")
    print(f"stored in   {path}")
    print(f"converted   {state}")
    if converted:
        meta = _paths.read_metadata(path, cls.__name__)
        print(f"transitions {meta.get('num_transitions')}")
        print(
            f"downloaded  {meta.get('download_bytes')} bytes from {', '.join(meta.get('source', []))}"
        )
        print(f"on disk     {_size(path)} bytes")
        entries = ", ".join(sorted(meta.get("spec", {})))
        print(f"entries     {entries}")


def _download(
    cls: type[BaseDatasetExperienceReplay], dataset_id: str, root: Path | None, force: bool
) -> None:
    kwargs: dict[str, Any] = {"root": root}
    parameters = inspect.signature(cls).parameters
    if "download" in parameters:
        kwargs["download"] = "force" if force else True
    if "batch_size" in parameters:
        kwargs["batch_size"] = 1
    data = cls(dataset_id, **kwargs)
    print(f"{cls.__name__} {dataset_id}: {len(data)} transitions in {data.data_path}")
