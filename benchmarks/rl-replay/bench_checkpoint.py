"""Replay-buffer checkpoint throughput: MB/s of ``dumps`` and ``loads`` of 1M TED transitions.

Question answered: how fast does ``ReplayBuffer.dumps`` write, and ``loads`` read back,
a ``LazyTensorStorage`` holding one million TED transitions (the fields of
``bench_buffers.py``: about 170 MB), with everything a checkpoint of ours does
(raw tensor files, one CRC-32 per file computed at dump and verified at load, metadata
validated, an atomic commit, the storage filled in place)?  Ours and TorchRL 0.14 run
the same code; the ``floor`` is a plain ``torch.save`` / ``torch.load(weights_only=True)``
of the same tensors, already contiguous, into one file.  Rates are MB/s of stored data.

Size: ``BENCH_RB_CKPT_CAPACITY`` (default 1,000,000). Files go to ``BENCH_RB_CKPT_DIR``
(default: a temporary directory).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import torch

from _harness import Context, Workload, run

CAPACITY = int(os.environ.get("BENCH_RB_CKPT_CAPACITY", "1000000"))
OBS, ACT = 17, 6
FLAGS = ("done", "terminated", "truncated")


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


MEGABYTES = _ted(1).bytes() * CAPACITY / 1e6


def _directory() -> str:
    path = tempfile.mkdtemp(prefix="bench_ckpt_", dir=os.environ.get("BENCH_RB_CKPT_DIR"))
    atexit.register(shutil.rmtree, path, True)
    return path


def _filled(ctx: Context):
    rb = ctx.lib.data.ReplayBuffer(storage=ctx.lib.data.LazyTensorStorage(CAPACITY))
    chunk = _ted(min(CAPACITY, 10_000))
    for _ in range(0, CAPACITY, chunk.shape[0]):
        rb.extend(chunk)
    return rb


# ------------------------------------------------------------------ ours and TorchRL
def dumps(ctx: Context):
    rb = _filled(ctx)
    path = os.path.join(_directory(), "ck")
    return lambda: rb.dumps(path)


def loads(ctx: Context):
    source = _filled(ctx)
    path = os.path.join(_directory(), "ck")
    source.dumps(path)
    target = ctx.lib.data.ReplayBuffer(storage=ctx.lib.data.LazyTensorStorage(CAPACITY))
    target.loads(path)  # allocate once: the timed loads fill an initialised buffer
    return lambda: target.loads(path)


# ------------------------------------------------------------------ floor
def _floor_tensors():
    chunk = _ted(min(CAPACITY, 10_000))
    return {
        "/".join(key) if isinstance(key, tuple) else key: value.repeat(
            CAPACITY // chunk.shape[0], *([1] * (value.ndim - 1))
        )
        for key, value in chunk.items(True, True)
    }


def dumps_floor(ctx: Context):
    tensors = _floor_tensors()
    path = os.path.join(_directory(), "floor.pt")
    return lambda: torch.save(tensors, path)


def loads_floor(ctx: Context):
    tensors = _floor_tensors()
    path = os.path.join(_directory(), "floor.pt")
    torch.save(tensors, path)
    return lambda: torch.load(path, weights_only=True)


SETUPS_DUMPS = {"rl_stack": dumps, "torchrl": dumps, "floor": dumps_floor}
SETUPS_LOADS = {"rl_stack": loads, "torchrl": loads, "floor": loads_floor}
WORKLOADS = [
    Workload(
        f"TED dumps, LazyTensorStorage({CAPACITY:,}) full",
        setups=SETUPS_DUMPS,
        items=round(MEGABYTES),
        unit="MB",
    ),
    Workload(
        f"TED loads, LazyTensorStorage({CAPACITY:,}) full",
        setups=SETUPS_LOADS,
        items=round(MEGABYTES),
        unit="MB",
    ),
]

if __name__ == "__main__":
    run(WORKLOADS)
