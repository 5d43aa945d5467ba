"""Ray replay buffers and collectors: what the trip through Ray costs.

Questions answered:

* ``RayReplayBuffer.extend`` of 1000 TED transitions and ``sample(256)``: transitions/s
  of ours (``rl_stack``), of the local ``ReplayBuffer`` on the same storage (``floor``:
  what the actor itself does) and of TorchRL 0.14's ``RayReplayBuffer`` (``torchrl``).
  Ours is also timed with ``write_behind=32`` (writes staged in the client, each shard
  gets them in one call and writes them with one local ``extend``) and ``prefetch=8`` /
  ``prefetch=32`` (8 or 32 batches per call, drawn ahead as one draw): one round trip
  for many calls.
* ``RayCollector``, 2 collectors of 4 CartPoles (``SerialEnv``), 200 and 1000 frames
  per collector and batch: frames/s, against ``MultiSyncDataCollector`` with the same
  layout (``floor``). Ray adds a fixed cost per batch (two actor calls, the batches
  through the object store), so the ratio grows with the batch.

Each library starts its own local Ray runtime (``ray.init(address="local", num_cpus=2)``) in its process.
Size: ``BENCH_RAY_CAPACITY`` (default 100,000). Every ``extend`` workload writes for
``BENCH_RAY_WARMUP`` seconds (default 3) before it is timed: the steady state, past the
first use of the object store's pages (see ``_warm``).
"""

from __future__ import annotations

import functools
import os
import time

import torch

from _harness import Context, Workload, run

CAPACITY = int(os.environ.get("BENCH_RAY_CAPACITY", "100000"))
WARMUP = float(os.environ.get("BENCH_RAY_WARMUP", "3.0"))  # seconds of writes before timing
CHUNK = 1000
BATCH = 256
OBS, ACT = 17, 6
FLAGS = ("done", "terminated", "truncated")
ENVS_PER_COLLECTOR = 4
FRAMES_PER_COLLECTOR = 200


def _ray():
    import ray

    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    return ray


def _ted(count: int):
    from tensordict import TensorDict

    flags = {flag: torch.zeros(count, 1, dtype=torch.bool) for flag in FLAGS}
    return TensorDict(
        {
            "observation": torch.randn(count, OBS),
            "action": torch.randn(count, ACT),
            **flags,
            "next": {
                "observation": torch.randn(count, OBS),
                "reward": torch.randn(count, 1),
                **flags,
            },
        },
        [count],
    )


# ------------------------------------------------------------------ buffers
def _ours(**kwargs):
    from rl_stack.data import LazyTensorStorage, RayReplayBuffer

    _ray()
    return RayReplayBuffer(storage=LazyTensorStorage(CAPACITY), batch_size=BATCH, **kwargs)


def _local():
    from rl_stack.data import LazyTensorStorage, ReplayBuffer

    return ReplayBuffer(storage=LazyTensorStorage(CAPACITY), batch_size=BATCH)


def _torchrl():
    from torchrl.data import LazyTensorStorage
    from torchrl.data.replay_buffers.ray_buffer import RayReplayBuffer

    _ray()
    return RayReplayBuffer(
        storage=functools.partial(LazyTensorStorage, CAPACITY),
        batch_size=BATCH,
        remote_config={"num_cpus": 0},
    )


def _filled(rb):
    chunk = _ted(CHUNK)
    for _ in range(20):
        rb.extend(chunk)
    if hasattr(rb, "_flush"):
        rb._flush()
    return rb


def _warm(fn) -> None:
    """Call ``fn`` for ``WARMUP`` seconds: a fresh Ray runtime's object store faults in
    (and the kernel zeroes) each page the first time an object lands on it, and Ray
    frees dropped objects in batches (about every second), so the first seconds of
    writes through it cost several times the steady state a training run sees."""
    deadline = time.perf_counter() + WARMUP
    while time.perf_counter() < deadline:
        fn()


def _extend(make):
    def setup(ctx: Context):
        rb = _filled(make())
        chunk = _ted(CHUNK)
        _warm(lambda: rb.extend(chunk))
        return lambda: rb.extend(chunk)

    return setup


def _sample(make, batches: int = 1):
    """``batches`` samples per timed call: with ``prefetch=k`` a call of ``k`` samples
    is one whole cycle (one request, ``k`` batches handed out), whatever the loop count."""

    def setup(ctx: Context):
        rb = _filled(make())
        if batches == 1:
            return rb.sample
        return lambda: [rb.sample() for _ in range(batches)]

    return setup


# ------------------------------------------------------------------ collectors
def _cartpoles():
    from rl_stack.envs import GymEnv, SerialEnv

    return SerialEnv(ENVS_PER_COLLECTOR, functools.partial(GymEnv, "CartPole-v1"))


def _collect(cls_name: str, per_collector: int = FRAMES_PER_COLLECTOR):
    def setup(ctx: Context):
        import rl_stack.collectors as collectors

        if cls_name == "RayCollector":
            _ray()
        cls = getattr(collectors, cls_name)
        collector = cls(
            [_cartpoles, _cartpoles],
            frames_per_batch=2 * per_collector,
            total_frames=-1,
        )
        batches = iter(collector)
        next(batches)
        return lambda: next(batches)

    return setup


WORKLOADS = [
    Workload(
        f"RayReplayBuffer.extend({CHUNK}) TED, LazyTensorStorage({CAPACITY})",
        setups={"rl_stack": _extend(_ours), "floor": _extend(_local), "torchrl": _extend(_torchrl)},
        items=CHUNK,
        unit="transitions",
    ),
    Workload(
        f"RayReplayBuffer(write_behind=32).extend({CHUNK}) TED",
        setups={
            "rl_stack": _extend(functools.partial(_ours, write_behind=32)),
            "floor": _extend(_local),
        },
        items=CHUNK,
        unit="transitions",
    ),
    Workload(
        f"RayReplayBuffer.sample({BATCH}) TED",
        setups={"rl_stack": _sample(_ours), "floor": _sample(_local), "torchrl": _sample(_torchrl)},
        items=BATCH,
        unit="transitions",
    ),
    *[
        Workload(
            f"RayReplayBuffer(prefetch={prefetch}).sample({BATCH}) TED",
            setups={
                "rl_stack": _sample(functools.partial(_ours, prefetch=prefetch), prefetch),
                "floor": _sample(_local, prefetch),
            },
            items=BATCH * prefetch,
            unit="transitions",
        )
        for prefetch in (8, 32)
    ],
    *[
        Workload(
            f"RayCollector 2 x {ENVS_PER_COLLECTOR} CartPole, {per} frames per collector and "
            f"batch (floor: MultiSyncDataCollector)",
            setups={
                "rl_stack": _collect("RayCollector", per),
                "floor": _collect("MultiSyncDataCollector", per),
            },
            items=2 * per,
            unit="frames",
        )
        for per in (FRAMES_PER_COLLECTOR, 5 * FRAMES_PER_COLLECTOR)
    ],
]

# ------------------------------------------------------------------ scaling simulation
# Per-call costs (seconds) measured on the 2-core machine of issue 20 (load average ~11
# from other jobs; medians of two runs): the round trip of an empty actor call (0.75 ms);
# a synchronous extend(1000) of TED transitions, sent as inline arguments: the driver's
# part (packing, sending: 0.47 ms) and the actor's (receiving, the local buffer's work,
# the reply: 0.88 ms); a flush of 32 staged extends (write_behind=32): 9.9 ms in the
# driver (staging the 32 writes in the block: 1.6 ms; its ray.put, 5.4 MB: 1.2-9.9 ms,
# median 9.9 ms, on a background thread that the next flush waits for) and 7.0 ms in the
# actor (measured before the staging block: joining, one local extend of 32,000); a sample(256): 0.05 ms in the driver, 0.72 ms in the actor; a
# prefetch call of 8 samples: 0.29 ms and 3.9 ms. Each sum with the round trip is the
# time a synchronous call was measured to take.
# Later (staged rows read in place by the shard, consecutive positions answered as ranges,
# staging 54 -> 32 us a write; one draw packed once for a prefetch call), CPU per
# extend(1000) with write_behind=32 in the steady state, over every process: driver
# 150-190 us, shard 135-150 us, raylet 40-60 us (before: 250-300, 180-250, 100-130;
# the local extend: ~70 us); the values above are kept for the simulation.
COSTS = {
    "round_trip": float(os.environ.get("BENCH_RAY_RTT", "0.00075")),
    "extend_client": float(os.environ.get("BENCH_RAY_EXTEND_CLIENT", "0.00047")),
    "extend_actor": float(os.environ.get("BENCH_RAY_EXTEND_ACTOR", "0.00088")),
    "flush_client": float(os.environ.get("BENCH_RAY_FLUSH_CLIENT", "0.0099")),
    "flush_actor": float(os.environ.get("BENCH_RAY_FLUSH_ACTOR", "0.0070")),
    "sample_client": float(os.environ.get("BENCH_RAY_SAMPLE_CLIENT", "0.00005")),
    "sample_actor": float(os.environ.get("BENCH_RAY_SAMPLE_ACTOR", "0.00072")),
    "prefetch_client": float(os.environ.get("BENCH_RAY_PREFETCH_CLIENT", "0.00029")),
    "prefetch_actor": float(os.environ.get("BENCH_RAY_PREFETCH_ACTOR", "0.0039")),
}
ITEMS_PER_CALL = {"extend": CHUNK, "flush": 32 * CHUNK, "sample": BATCH, "prefetch": 8 * BATCH}


def simulate(clients: int, shards: int, in_flight: int, op: str, calls: int = 4000) -> float:
    """Calls/s of ``clients`` each keeping ``in_flight`` calls to ``shards`` FIFO actors.

    A client spends its part of a call on its own core, the request travels half a
    round trip, waits for the shard (one call at a time), is served, and the reply
    travels back; a client starts a new call when it has fewer than ``in_flight``
    outstanding ones. Calls go to the shards in turn.
    """
    import heapq

    half = COSTS["round_trip"] / 2
    client_cost, actor_cost = COSTS[f"{op}_client"], COSTS[f"{op}_actor"]
    shard_free = [0.0] * shards
    client_free = [0.0] * clients
    outstanding: list[list[float]] = [[] for _ in range(clients)]
    turn = [c % shards for c in range(clients)]
    done, now = 0, 0.0
    events = [(0.0, c) for c in range(clients)]
    while done < calls:
        now, c = heapq.heappop(events)
        outstanding[c] = [t for t in outstanding[c] if t > now]
        if len(outstanding[c]) >= in_flight:
            heapq.heappush(events, (min(outstanding[c]), c))
            continue
        start = max(now, client_free[c])
        client_free[c] = start + client_cost
        shard = turn[c]
        turn[c] = (shard + 1) % shards
        served = max(client_free[c] + half, shard_free[shard]) + actor_cost
        shard_free[shard] = served
        outstanding[c].append(served + half)
        done += 1
        heapq.heappush(events, (client_free[c], c))
    return calls / max(max(shard_free) + half, 1e-9)


def print_simulation() -> None:
    print("| op | clients | shards | in flight | calls/s | items/s |")
    print("| --- | --- | --- | --- | --- | --- |")
    layouts = {
        "extend": ((1, 1, 1), (4, 1, 1), (4, 2, 1), (4, 4, 1), (8, 8, 2)),
        "flush": ((1, 1, 2), (1, 2, 2), (4, 1, 2), (4, 4, 2), (8, 8, 2)),
        "sample": ((1, 1, 1), (4, 4, 1), (8, 8, 2)),
        "prefetch": ((1, 1, 1), (1, 1, 2), (4, 4, 1), (8, 8, 2)),
    }
    for op, rows in layouts.items():
        for clients, shards, in_flight in rows:
            rate = simulate(clients, shards, in_flight, op)
            items = rate * ITEMS_PER_CALL[op]
            print(f"| {op} | {clients} | {shards} | {in_flight} | {rate:,.0f} | {items:,.0f} |")


if __name__ == "__main__":
    import sys

    if "--simulate" in sys.argv:
        print_simulation()
    else:
        run(WORKLOADS)
