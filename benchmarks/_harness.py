"""Timing core shared by every ``bench_*.py`` file.

A benchmark file declares ``WORKLOADS`` (a list of :class:`Workload`) and ends with
``if __name__ == "__main__": run(WORKLOADS)``. The runner (``python -m benchmarks``)
executes the file once per interpreter: in the project's environment for ``rl_stack``
and the plain-torch ``floor``, and in the peer venv for every other library. Each
process times the libraries it was given and writes its rows as JSON.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

#: Libraries that run in the project's environment; every other one runs in the peer venv.
OURS = "rl_stack"
LOCAL_LIBS = frozenset({OURS, "floor"})


@dataclass(frozen=True)
class Context:
    """What a setup function receives: the library under test and where to run.

    ``lib.envs`` / ``lib.data`` are ``rl_stack.envs`` / ``rl_stack.data`` or
    ``torchrl.envs`` / ``torchrl.data``, so a workload is written once against the
    documented API. Raw peers (``floor``, ``cpprb``, ...) get an empty namespace.
    """

    name: str
    device: str
    lib: Any  # a namespace of modules; its attributes depend on the library


# A setup builds the workload's state and returns the zero-argument callable to time.
Setup = Callable[[Context], Callable[[], object]]


@dataclass(frozen=True)
class Workload:
    """One measured operation, implemented for several libraries.

    Args:
        name: what is measured, e.g. ``"Composite.rand() [8], 20 leaves"``.
        setups: library name -> setup function. ``"rl_stack"`` must be present.
        items: how many items one call processes (steps of a rollout, samples, ...).
        unit: what an item is, e.g. ``"steps"``; rates are reported as ``unit/s``.
        devices: the devices this workload can run on.
    """

    name: str
    setups: Mapping[str, Setup]
    items: int = 1
    unit: str = "calls"
    devices: tuple[str, ...] = ("cpu",)
    notes: str = field(default="")


def _library(name: str) -> Any:
    if name in (OURS, "torchrl"):
        return SimpleNamespace(
            envs=importlib.import_module(f"{name}.envs"),
            data=importlib.import_module(f"{name}.data"),
        )
    return SimpleNamespace()


def _time(fn: Callable[[], object], items: int, repeats: int, min_time: float) -> list[float]:
    """Rates (items/s) of ``repeats`` runs, each looping ``fn`` for at least ``min_time`` s."""
    start = time.perf_counter()
    fn()  # warm-up: lazy allocation, caches, first-call validation
    once = max(time.perf_counter() - start, 1e-7)
    loops = max(1, int(min_time / once))
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        rates.append(items * loops / (time.perf_counter() - start))
    return rates


def measure(
    workload: Workload, lib: str, *, device: str, repeats: int, min_time: float
) -> dict[str, Any]:
    """Time one workload on one library; failures become a row with the reason."""
    row: dict[str, Any] = {
        "workload": workload.name,
        "lib": lib,
        "device": device,
        "unit": f"{workload.unit}/s",
    }
    try:
        fn = workload.setups[lib](Context(name=lib, device=device, lib=_library(lib)))
        rates = _time(fn, workload.items, repeats, min_time)
    except Exception as err:  # a peer that cannot run is reported, not fatal
        last = traceback.format_exception_only(type(err), err)[-1].strip()
        row["error"] = last[:200]
        return row
    row.update(median=statistics.median(rates), min=min(rates), max=max(rates))
    return row


def run(workloads: list[Workload], argv: list[str] | None = None) -> None:
    """Entry point of a benchmark file run as a script (normally by the runner)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--libs", default=OURS, help="comma-separated libraries to time")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=0.2)
    parser.add_argument("--only", default="", help="substring of the workload names to run")
    parser.add_argument("--json", default="", help="write rows here instead of printing them")
    args = parser.parse_args(argv)

    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)  # the same budget for every library; envs pin workers anyway
    rows = []
    for workload in workloads:
        if args.only not in workload.name or args.device not in workload.devices:
            continue
        for lib in args.libs.split(","):
            if lib in workload.setups:
                rows.append(
                    measure(
                        workload,
                        lib,
                        device=args.device,
                        repeats=args.repeats,
                        min_time=args.min_time,
                    )
                )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f)
    else:
        json.dump(rows, sys.stdout, indent=1)
        print()
