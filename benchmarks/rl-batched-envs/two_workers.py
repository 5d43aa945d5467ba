"""Two collector workers against one process, alternated call by call, with CPU accounting.

    python benchmarks/rl-batched-envs/two_workers.py [rounds]   # ours and the floors

Rows: ``Collector(SerialEnv(8))`` (one process, 8 CartPoles),
``MultiSyncCollector`` and ``MultiAsyncCollector`` over 2 workers x
``SerialEnv(4)``, and the framework-free floors of both shapes
(``_collector_floors.py``: the 8 envs in one process; 2 forked processes of 4 envs
signalled by one pipe byte per batch, writing into shared arrays).

Wall-clock rates on a 2-core machine shared with other work say little about two
processes: Linux's autogroup scheduler shares the CPU between *sessions*, so with
other sessions busy the two workers together get about what one process gets
(``floor 2 proc / floor 1 proc`` says what two processes get at that moment). So
each row also reports, from ``/proc/<pid>/schedstat`` of the parent and of each
worker, the CPU time per batch and the time spent runnable but waiting for a CPU,
and the rate the CPU times allow on two free cores: one process at its CPU time;
a sync batch at the parent's CPU time plus the slowest worker's (they run in
parallel); an async batch at the larger of the two (the workers run ahead).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import bench_collectors as bench

from _harness import Context, _library

_ASYNC_CALLS = 10  # timed calls per async round; the first 2 batches were collected before


def _schedstat(pid: int) -> tuple[int, int]:
    """(ns on a CPU, ns runnable waiting for one) of every thread of ``pid``."""
    run = wait = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "schedstat").read_text().split()
        except OSError:  # a thread that just ended
            continue
        run, wait = run + int(fields[0]), wait + int(fields[1])
    return run, wait


def _rows(ctx: Context) -> dict:
    """name -> (call, frames per call, worker pids, kind)."""
    steps = bench.STEPS
    single = bench.serial_collector(ctx)
    sync = bench.multi_sync_collector(ctx)
    sync_pids = bench._OPEN[-1].worker_pids()
    asyn = bench.multi_async_collector(ctx)
    async_pids = bench._OPEN[-1].worker_pids()
    floor1 = bench.parallel_floor(ctx)
    floor2 = bench.two_process_floor(ctx)
    floor2_pids = [p.pid for p in bench._OPEN[-1].procs]

    def async_calls():
        for _ in range(_ASYNC_CALLS):
            asyn()

    return {
        "Collector(SerialEnv(8))": (single, 8 * steps, [], "one"),
        "MultiSyncCollector(2 x 4)": (sync, 8 * steps, sync_pids, "sync"),
        "MultiAsyncCollector(2 x 4)": (
            async_calls,
            (_ASYNC_CALLS - 2) * 4 * steps,
            async_pids,
            "async",
        ),
        "floor, 1 process (8 envs)": (floor1, 8 * steps, [], "one"),
        "floor, 2 processes (2 x 4)": (floor2, 8 * steps, floor2_pids, "sync"),
    }


def compare(rounds: int = 15) -> dict[str, dict[str, float]]:
    """Time every row ``rounds`` times, alternated; print and return the table."""
    ctx = Context(name="rl_stack", device="cpu", lib=_library("rl_stack"))
    bench._KEEP.append(True)
    try:
        rows = _rows(ctx)
        samples: dict[str, list[tuple]] = {name: [] for name in rows}
        for call, *_ in rows.values():
            call()
        me = os.getpid()
        for _ in range(rounds):
            for name, (call, _, pids, _) in rows.items():
                before = [_schedstat(p) for p in (me, *pids)]
                start = time.perf_counter()
                call()
                wall = time.perf_counter() - start
                after = [_schedstat(p) for p in (me, *pids)]
                cpu = [(a[0] - b[0]) / 1e9 for a, b in zip(after, before)]
                wait = sum(a[1] - b[1] for a, b in zip(after, before)) / 1e9
                samples[name].append((wall, cpu, wait))
    finally:
        bench._KEEP.clear()
        bench._track()
    return _report(rows, samples)


def _report(rows: dict, samples: dict) -> dict[str, dict[str, float]]:
    table = {}
    print("### collector: two workers vs one process, alternated call by call")
    print(
        "| row | frames/s (wall) | CPU ms / 800 frames (parent + workers) | runnable-waiting ms / 800 frames "
        "| frames/s on 2 free cores (from CPU times) |"
    )
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, (_, frames, pids, kind) in rows.items():
        wall = statistics.median(s[0] for s in samples[name])
        parent = statistics.median(s[1][0] for s in samples[name])
        workers = [
            statistics.median(s[1][i] for s in samples[name]) for i in range(1, 1 + len(pids))
        ]
        wait = statistics.median(s[2] for s in samples[name])
        if kind == "one":
            critical = parent
        elif kind == "sync":
            critical = parent + max(workers)
        else:
            critical = max(parent, max(workers))
        total = parent + sum(workers)
        per800 = 800 / frames * 1e3
        table[name] = {
            "rate": frames / wall,
            "cpu_ms": total * per800,
            "wait_ms": wait * per800,
            "ideal_rate": frames / critical,
        }
        r = table[name]
        split = " + ".join(f"{c * per800:.2f}" for c in (parent, *workers))
        print(
            f"| {name} | {r['rate']:,.0f} | {r['cpu_ms']:.2f} ({split}) | {r['wait_ms']:.2f} "
            f"| {r['ideal_rate']:,.0f} |"
        )
    one, floor1 = table["Collector(SerialEnv(8))"], table["floor, 1 process (8 envs)"]
    floor2 = table["floor, 2 processes (2 x 4)"]
    for name in ("MultiSyncCollector(2 x 4)", "MultiAsyncCollector(2 x 4)"):
        r = table[name]
        print(
            f"{name} / Collector(SerialEnv(8)): wall {r['rate'] / one['rate']:.2f}x, "
            f"2 free cores {r['ideal_rate'] / one['ideal_rate']:.2f}x; ours/floor(2 proc): "
            f"wall {r['rate'] / floor2['rate']:.2f}x, 2 free cores "
            f"{r['ideal_rate'] / floor2['ideal_rate']:.2f}x"
        )
    print(
        f"floor 2 proc / floor 1 proc: wall {floor2['rate'] / floor1['rate']:.2f}x (what two "
        f"processes get now), 2 free cores {floor2['ideal_rate'] / floor1['ideal_rate']:.2f}x"
    )
    return table


if __name__ == "__main__":
    import torch

    torch.set_num_threads(1)
    compare(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
