"""Two collector workers against one process, alternated call by call, with CPU accounting.

    python benchmarks/rl-batched-envs/two_workers.py [rounds]   # ours and the floors

Rows: ``Collector(SerialEnv(8))`` (one process, 8 CartPoles), ``Collector(SerialEnv(4))``
(what one worker runs, in this process: two of them in parallel are the ideal),
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
_SETTLE_S = 0.05  # pause after each timed call: no row is timed while another one works


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
    env4 = bench._serial4(ctx.lib.envs)
    collector4 = bench._collectors(ctx).Collector(
        env4, None, frames_per_batch=4 * steps, total_frames=-1
    )
    bench._track(collector4, env4)
    half = bench._batches(collector4)
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
        "Collector(SerialEnv(4))": (half, 4 * steps, [], "one"),
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
                time.sleep(_SETTLE_S)  # the async workers' batches in flight end here
    finally:
        bench._KEEP.clear()
        bench._track()
    return _report(rows, samples)


def _critical(kind: str, cpu: list[float]) -> float:
    """Seconds a call takes on two free cores, from its processes' CPU times."""
    parent, workers = cpu[0], cpu[1:]
    if kind == "one":
        return parent
    if kind == "sync":  # the workers run in parallel, the parent before and after them
        return parent + max(workers)
    return max(parent, *workers)  # async: the workers run ahead of the parent


def _report(rows: dict, samples: dict) -> dict[str, dict[str, float]]:
    """Medians (and bests: the least disturbed call) of each row, and the ratios."""
    table = {}
    print("### collector: two workers vs one process, alternated call by call")
    print(
        "| row | frames/s wall: median (best) | CPU ms / 800 frames: parent + workers "
        "| run-queue wait ms / 800 frames | frames/s on 2 free cores: median (best) |"
    )
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, (_, frames, _, kind) in rows.items():
        runs = samples[name]
        per800 = 800 / frames * 1e3
        walls = [s[0] for s in runs]
        critical = [_critical(kind, s[1]) for s in runs]
        split = [statistics.median(s[1][i] for s in runs) * per800 for i in range(len(runs[0][1]))]
        r = table[name] = {
            "rate": frames / statistics.median(walls),
            "best_rate": frames / min(walls),
            "cpu_ms": sum(split),
            "wait_ms": statistics.median(s[2] for s in runs) * per800,
            "ideal_rate": frames / statistics.median(critical),
            "best_ideal_rate": frames / min(critical),
        }
        print(
            f"| {name} | {r['rate']:,.0f} ({r['best_rate']:,.0f}) | {r['cpu_ms']:.2f} = "
            f"{' + '.join(f'{c:.2f}' for c in split)} | {r['wait_ms']:.2f} "
            f"| {r['ideal_rate']:,.0f} ({r['best_ideal_rate']:,.0f}) |"
        )
    one, floor1 = table["Collector(SerialEnv(8))"], table["floor, 1 process (8 envs)"]
    floor2 = table["floor, 2 processes (2 x 4)"]

    def ratios(a: dict, b: dict) -> str:
        return (
            f"wall {a['rate'] / b['rate']:.2f}x (best {a['best_rate'] / b['best_rate']:.2f}x), "
            f"2 free cores {a['ideal_rate'] / b['ideal_rate']:.2f}x "
            f"(best {a['best_ideal_rate'] / b['best_ideal_rate']:.2f}x)"
        )

    for name in ("MultiSyncCollector(2 x 4)", "MultiAsyncCollector(2 x 4)"):
        print(f"{name} / Collector(SerialEnv(8)): {ratios(table[name], one)}")
        print(f"{name} / floor 2 proc: {ratios(table[name], floor2)}")
    print(f"floor 2 proc / floor 1 proc (what two processes get): {ratios(floor2, floor1)}")
    return table


if __name__ == "__main__":
    import torch

    torch.set_num_threads(1)
    compare(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
