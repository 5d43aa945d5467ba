"""Replay-buffer write and read cost: TED transitions at 1M capacity, and 84x84 pixels.

Questions answered:

* TED transitions (``observation`` float32[17], ``action`` float32[6], ``reward``,
  ``done``/``terminated``/``truncated`` and the same under ``"next"``), one million
  capacity: transitions/s of ``extend`` in chunks of 1000, and of ``sample(256)``, for
  ``LazyTensorStorage`` and ``LazyMemmapStorage`` (ours and TorchRL 0.14), for
  stable-baselines3's and cpprb's ``ReplayBuffer`` (their own layout of the same
  fields) and for the ``floor``: preallocated tensors written by slice and read by one
  ``index_select`` per field.
* The same TED ``extend`` of 1000 into a ``LazyTensorStorage`` buffer with a
  ``SliceSampler`` attached (trajectories marked by ``("next", "done")``): what the
  sampler's trajectory bookkeeping adds to a write (ours, TorchRL 0.14).
* 84x84 uint8 pixels, 100k capacity: samples/s of ``sample(32)`` (ours, TorchRL, cpprb,
  floor).

Sizes: ``BENCH_RB_CAPACITY`` (default 1,000,000) and ``BENCH_RB_PIXEL_CAPACITY``
(default 100,000).
"""

from __future__ import annotations

import os

import numpy as np
import torch

from _harness import Context, Workload, run

CAPACITY = int(os.environ.get("BENCH_RB_CAPACITY", "1000000"))
PIXEL_CAPACITY = int(os.environ.get("BENCH_RB_PIXEL_CAPACITY", "100000"))
CHUNK = 1000
BATCH = 256
PIXEL_BATCH = 32
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


def _pixels(count: int):
    from tensordict import TensorDict

    return TensorDict({"pixels": torch.randint(255, (count, 84, 84), dtype=torch.uint8)}, [count])


def _buffer(ctx: Context, storage_name: str, capacity: int, batch: int):
    storage = getattr(ctx.lib.data, storage_name)(capacity)
    return ctx.lib.data.ReplayBuffer(storage=storage, batch_size=batch)


def _filled(ctx: Context, storage_name: str, capacity: int, batch: int, make):
    rb = _buffer(ctx, storage_name, capacity, batch)
    chunk = make(min(capacity, 10_000))
    for _ in range(0, capacity, chunk.shape[0]):
        rb.extend(chunk)
    return rb


# Every extend workload first writes the whole capacity once, so that the timed writes
# are the steady state of a wrapping buffer rather than first-touch page faults.


# ------------------------------------------------------------------ ours and TorchRL
def _extend(ctx: Context, storage_name: str):
    data = _ted(CHUNK)
    rb = _filled(ctx, storage_name, CAPACITY, BATCH, _ted)
    return lambda: rb.extend(data)


def extend_lazy_tensor(ctx: Context):
    return _extend(ctx, "LazyTensorStorage")


def extend_lazy_memmap(ctx: Context):
    return _extend(ctx, "LazyMemmapStorage")


def extend_slice_sampler(ctx: Context):
    data = _ted(CHUNK)
    sampler = ctx.lib.data.SliceSampler(num_slices=8, end_key=("next", "done"))
    rb = ctx.lib.data.ReplayBuffer(
        storage=ctx.lib.data.LazyTensorStorage(CAPACITY), sampler=sampler, batch_size=BATCH
    )
    chunk = _ted(10_000)
    for _ in range(0, CAPACITY, chunk.shape[0]):
        rb.extend(chunk)
    rb.sample()  # the sampler has seen the whole storage once
    return lambda: rb.extend(data)


def sample_lazy_tensor(ctx: Context):
    return _filled(ctx, "LazyTensorStorage", CAPACITY, BATCH, _ted).sample


def sample_lazy_memmap(ctx: Context):
    return _filled(ctx, "LazyMemmapStorage", CAPACITY, BATCH, _ted).sample


def sample_pixels(ctx: Context):
    return _filled(ctx, "LazyTensorStorage", PIXEL_CAPACITY, PIXEL_BATCH, _pixels).sample


# ------------------------------------------------------------------ floor
def _floor_tensors(capacity: int, make):
    data = make(CHUNK)
    leaves = [torch.empty(capacity, *t.shape[1:], dtype=t.dtype) for t in data.values(True, True)]
    return data, leaves


def extend_floor(ctx: Context):
    data, leaves = _floor_tensors(CAPACITY, _ted)
    values = list(data.values(True, True))
    for leaf in leaves:
        leaf.zero_()
    cursor = [0]

    def step():
        start = cursor[0]
        for leaf, value in zip(leaves, values, strict=True):
            leaf[start : start + CHUNK] = value
        cursor[0] = (start + CHUNK) % CAPACITY

    return step


def _sample_floor(capacity: int, batch: int, make):
    _, leaves = _floor_tensors(capacity, make)
    for leaf in leaves:
        leaf.zero_()

    def step():
        index = torch.randint(capacity, (batch,))
        return [leaf.index_select(0, index) for leaf in leaves]

    return step


def sample_floor(ctx: Context):
    return _sample_floor(CAPACITY, BATCH, _ted)


def sample_pixels_floor(ctx: Context):
    return _sample_floor(PIXEL_CAPACITY, PIXEL_BATCH, _pixels)


# ------------------------------------------------------------------ stable-baselines3
def _sb3_buffer(n_envs: int):
    from gymnasium import spaces
    from stable_baselines3.common.buffers import ReplayBuffer

    obs_space = spaces.Box(-np.inf, np.inf, (OBS,), np.float32)
    act_space = spaces.Box(-1.0, 1.0, (ACT,), np.float32)
    return ReplayBuffer(CAPACITY, obs_space, act_space, device="cpu", n_envs=n_envs)


def _sb3_chunk(n_envs: int):
    obs = np.random.randn(n_envs, OBS).astype(np.float32)
    act = np.random.randn(n_envs, ACT).astype(np.float32)
    infos = [{} for _ in range(n_envs)]
    return obs, obs.copy(), act, np.zeros(n_envs, np.float32), np.zeros(n_envs, np.float32), infos


def extend_sb3(ctx: Context):
    rb = _sb3_buffer(CHUNK)  # one add() writes CHUNK transitions (one per env)
    chunk = _sb3_chunk(CHUNK)
    for _ in range(CAPACITY // CHUNK):
        rb.add(*chunk)
    return lambda: rb.add(*chunk)


def sample_sb3(ctx: Context):
    rb = _sb3_buffer(CHUNK)
    chunk = _sb3_chunk(CHUNK)
    for _ in range(CAPACITY // CHUNK):
        rb.add(*chunk)
    return lambda: rb.sample(BATCH)


# ------------------------------------------------------------------ cpprb
def _cpprb_fields():
    fields = {"obs": {"shape": OBS}, "act": {"shape": ACT}, "next_obs": {"shape": OBS}, "rew": {}}
    fields.update({flag: {"dtype": np.bool_} for flag in FLAGS})
    fields.update({f"next_{flag}": {"dtype": np.bool_} for flag in FLAGS})
    return fields


def _cpprb_chunk(count: int):
    chunk = {
        "obs": np.random.randn(count, OBS).astype(np.float32),
        "act": np.random.randn(count, ACT).astype(np.float32),
        "next_obs": np.random.randn(count, OBS).astype(np.float32),
        "rew": np.random.randn(count, 1).astype(np.float32),
    }
    for flag in FLAGS:
        chunk[flag] = chunk[f"next_{flag}"] = np.zeros((count, 1), np.bool_)
    return chunk


def extend_cpprb(ctx: Context):
    from cpprb import ReplayBuffer

    rb, chunk = ReplayBuffer(CAPACITY, _cpprb_fields()), _cpprb_chunk(CHUNK)
    for _ in range(CAPACITY // CHUNK):
        rb.add(**chunk)
    return lambda: rb.add(**chunk)


def sample_cpprb(ctx: Context):
    from cpprb import ReplayBuffer

    rb = ReplayBuffer(CAPACITY, _cpprb_fields())
    chunk = _cpprb_chunk(10_000)
    for _ in range(CAPACITY // 10_000):
        rb.add(**chunk)
    return lambda: rb.sample(BATCH)


def sample_pixels_cpprb(ctx: Context):
    from cpprb import ReplayBuffer

    rb = ReplayBuffer(PIXEL_CAPACITY, {"pixels": {"shape": (84, 84), "dtype": np.uint8}})
    chunk = np.random.randint(0, 255, (10_000, 84, 84), dtype=np.uint8)
    for _ in range(PIXEL_CAPACITY // 10_000):
        rb.add(pixels=chunk)
    return lambda: rb.sample(PIXEL_BATCH)


OURS_AND_TORCHRL = ("rl_stack", "torchrl")
WORKLOADS = [
    Workload(
        f"TED extend {CHUNK}, LazyTensorStorage({CAPACITY:,})",
        setups={
            **dict.fromkeys(OURS_AND_TORCHRL, extend_lazy_tensor),
            "floor": extend_floor,
            "sb3": extend_sb3,
            "cpprb": extend_cpprb,
        },
        items=CHUNK,
        unit="transitions",
    ),
    Workload(
        f"TED extend {CHUNK}, LazyMemmapStorage({CAPACITY:,})",
        setups={**dict.fromkeys(OURS_AND_TORCHRL, extend_lazy_memmap), "floor": extend_floor},
        items=CHUNK,
        unit="transitions",
    ),
    Workload(
        f"TED extend {CHUNK}, LazyTensorStorage({CAPACITY:,}) + SliceSampler",
        setups={**dict.fromkeys(OURS_AND_TORCHRL, extend_slice_sampler), "floor": extend_floor},
        items=CHUNK,
        unit="transitions",
    ),
    Workload(
        f"TED sample {BATCH}, LazyTensorStorage({CAPACITY:,}) full",
        setups={
            **dict.fromkeys(OURS_AND_TORCHRL, sample_lazy_tensor),
            "floor": sample_floor,
            "sb3": sample_sb3,
            "cpprb": sample_cpprb,
        },
        items=BATCH,
        unit="samples",
    ),
    Workload(
        f"TED sample {BATCH}, LazyMemmapStorage({CAPACITY:,}) full",
        setups={**dict.fromkeys(OURS_AND_TORCHRL, sample_lazy_memmap), "floor": sample_floor},
        items=BATCH,
        unit="samples",
    ),
    Workload(
        f"84x84 uint8 pixels sample {PIXEL_BATCH}, LazyTensorStorage({PIXEL_CAPACITY:,}) full",
        setups={
            **dict.fromkeys(OURS_AND_TORCHRL, sample_pixels),
            "floor": sample_pixels_floor,
            "cpprb": sample_pixels_cpprb,
        },
        items=PIXEL_BATCH,
        unit="samples",
    ),
]

if __name__ == "__main__":
    run(WORKLOADS)
