"""Sampler throughput: prioritized sample + update at 1M capacity, and slice sampling.

Questions answered:

* ``PrioritizedSampler`` with one million stored elements: iterations/s of one
  ``sample(256)`` plus one ``update_priority`` of those 256 indices (ours, TorchRL 0.14,
  cpprb's ``PrioritizedReplayBuffer``, whose sample also gathers a 1-float observation).
* ``SliceSampler`` with 8 slices, batch 256, trajectories of 200 steps in a one-million
  step storage: samples/s (ours, TorchRL 0.14, and a ``floor``: a plain-torch gather of
  slices from precomputed trajectory starts, the cost of the index arithmetic alone).
* The same slice sampling interleaved with writes (one 200-step trajectory extended
  before every sample), where boundary bookkeeping is on the measured path.

Sizes: ``BENCH_SAMPLER_CAPACITY`` (default 1,000,000) and ``BENCH_SAMPLER_TRAJ``
(default 200).
"""

from __future__ import annotations

import os

import torch
from tensordict import TensorDict

from _harness import Context, Workload, run

CAPACITY = int(os.environ.get("BENCH_SAMPLER_CAPACITY", "1000000"))
TRAJ = int(os.environ.get("BENCH_SAMPLER_TRAJ", "200"))
BATCH = 256
NUM_SLICES = 8
ALPHA, BETA = 0.7, 0.5


def _filled_buffer(ctx: Context, sampler):
    """A buffer over a LazyTensorStorage holding CAPACITY steps of TRAJ-step episodes."""
    storage = ctx.lib.data.LazyTensorStorage(CAPACITY, device=ctx.device)
    rb = ctx.lib.data.ReplayBuffer(storage=storage, sampler=sampler)
    chunk = 100_000
    for start in range(0, CAPACITY, chunk):
        steps = torch.arange(start, min(start + chunk, CAPACITY))
        rb.extend(_steps(ctx, steps))
    return rb, storage


def _steps(ctx: Context, steps: torch.Tensor):
    return TensorDict(
        {"episode": steps // TRAJ, "obs": steps.float()}, [steps.numel()], device=ctx.device
    )


# ------------------------------------------------------------------ prioritized
def prioritized(ctx: Context):
    sampler = ctx.lib.data.PrioritizedSampler(CAPACITY, alpha=ALPHA, beta=BETA)
    _, storage = _filled_buffer(ctx, sampler)
    sampler.update_priority(
        torch.arange(CAPACITY, device=ctx.device), torch.rand(CAPACITY, device=ctx.device)
    )

    def step():
        index, _ = sampler.sample(storage, BATCH)
        sampler.update_priority(index, torch.rand(BATCH, device=ctx.device))

    return step


def prioritized_cpprb(ctx: Context):
    import numpy as np
    from cpprb import PrioritizedReplayBuffer

    if ctx.device != "cpu":
        raise RuntimeError("cpprb's PrioritizedReplayBuffer runs on CPU only")
    rb = PrioritizedReplayBuffer(CAPACITY, {"obs": {}}, alpha=ALPHA)
    rb.add(obs=np.arange(CAPACITY, dtype=np.float32), priorities=np.random.rand(CAPACITY) + 1e-3)

    def step():
        sample = rb.sample(BATCH, beta=BETA)
        rb.update_priorities(sample["indexes"], np.random.rand(BATCH))

    return step


# ------------------------------------------------------------------ slices
def slices(ctx: Context):
    sampler = ctx.lib.data.SliceSampler(num_slices=NUM_SLICES, traj_key="episode")
    _, storage = _filled_buffer(ctx, sampler)
    sampler.sample(storage, BATCH)  # first call: boundaries / caches

    def step():
        return sampler.sample(storage, BATCH)

    return step


def slices_floor(ctx: Context):
    """Slices from trajectory starts known in advance: randint + arange gather only."""
    starts = torch.arange(0, CAPACITY - TRAJ + 1, TRAJ, device=ctx.device)
    seq = BATCH // NUM_SLICES
    steps = torch.arange(seq, device=ctx.device)

    def step():
        traj = starts[torch.randint(starts.numel(), (NUM_SLICES,), device=ctx.device)]
        offset = (torch.rand(NUM_SLICES, device=ctx.device) * (TRAJ - seq + 1)).long()
        return ((traj + offset).unsqueeze(-1) + steps).reshape(-1)

    return step


def slices_with_writes(ctx: Context):
    sampler = ctx.lib.data.SliceSampler(num_slices=NUM_SLICES, traj_key="episode")
    rb, storage = _filled_buffer(ctx, sampler)
    episode = [CAPACITY // TRAJ]

    def step():
        steps = torch.arange(TRAJ) + episode[0] * TRAJ
        episode[0] += 1
        rb.extend(_steps(ctx, steps))
        return sampler.sample(storage, BATCH)

    return step


WORKLOADS = [
    Workload(
        f"PrioritizedSampler {CAPACITY:,}: sample {BATCH} + update_priority {BATCH}",
        setups={"rl_stack": prioritized, "torchrl": prioritized, "cpprb": prioritized_cpprb},
        unit="iterations",
        devices=("cpu", "cuda"),
    ),
    Workload(
        f"SliceSampler {NUM_SLICES} slices, batch {BATCH}, {TRAJ}-step trajectories, {CAPACITY:,} steps",
        setups={"rl_stack": slices, "torchrl": slices, "floor": slices_floor},
        items=BATCH,
        unit="samples",
        devices=("cpu", "cuda"),
    ),
    Workload(
        f"SliceSampler extend {TRAJ} steps + sample {BATCH}, {CAPACITY:,} steps",
        setups={"rl_stack": slices_with_writes, "torchrl": slices_with_writes},
        unit="iterations",
    ),
]

if __name__ == "__main__":
    run(WORKLOADS)
