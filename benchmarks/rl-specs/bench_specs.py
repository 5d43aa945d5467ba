"""Question this file answers: how many Composite.rand() / zero() / is_in() calls per second
on a 20-leaf nested spec of batch shape [8] (a typical env output spec), ours vs TorchRL 0.14?

The spec mixes the common leaf classes (Unbounded, Bounded, Categorical, OneHot, Binary)
over three nesting levels. ``is_in`` checks a sample drawn once in the setup.
"""

from __future__ import annotations

import torch

from _harness import Context, Workload, run

BATCH = 8


def _leaf(data, i: int):
    """Leaf number ``i`` of the spec, cycling through five spec classes."""
    kind = i % 5
    if kind == 0:
        return data.Unbounded(shape=(BATCH, 3), dtype=torch.float32)
    if kind == 1:
        return data.Bounded(low=-1.0, high=1.0, shape=(BATCH, 4), dtype=torch.float32)
    if kind == 2:
        return data.Categorical(n=5, shape=(BATCH, 1), dtype=torch.int64)
    if kind == 3:
        return data.OneHot(n=6, shape=(BATCH, 6), dtype=torch.bool)
    return data.Binary(n=2, shape=(BATCH, 2), dtype=torch.bool)


def make_spec(data):
    """20 leaves: 8 at the root, 8 under "next", 4 under ("next", "info")."""
    spec = data.Composite(shape=(BATCH,))
    for i in range(8):
        spec[f"root_{i}"] = _leaf(data, i)
    for i in range(8):
        spec["next", f"obs_{i}"] = _leaf(data, i + 8)
    for i in range(4):
        spec["next", "info", f"stat_{i}"] = _leaf(data, i + 16)
    assert len(list(spec.keys(True, True))) == 20
    return spec


def spec_rand(ctx: Context):
    return make_spec(ctx.lib.data).rand


def spec_zero(ctx: Context):
    return make_spec(ctx.lib.data).zero


def spec_is_in(ctx: Context):
    spec = make_spec(ctx.lib.data)
    sample = spec.rand()
    assert spec.is_in(sample)
    return lambda: spec.is_in(sample)


SETUPS = ("rl_stack", "torchrl")
WORKLOADS = [
    Workload("Composite.rand() [8], 20 leaves", setups=dict.fromkeys(SETUPS, spec_rand)),
    Workload("Composite.zero() [8], 20 leaves", setups=dict.fromkeys(SETUPS, spec_zero)),
    Workload("Composite.is_in() [8], 20 leaves", setups=dict.fromkeys(SETUPS, spec_is_in)),
]

if __name__ == "__main__":
    run(WORKLOADS)
