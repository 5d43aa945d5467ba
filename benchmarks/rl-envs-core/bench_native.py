"""PendulumEnv rollout throughput (steps/s): ours vs TorchRL 0.14, and a plain-torch floor.

Workloads: ``env.rollout(1000)`` with a random policy, on one pendulum (batch ``[]``)
and on a batch of 64 pendulums (``env.reset(env.gen_params(batch_size=[64]))``
passed as ``tensordict=``: PendulumEnv is batch-unlocked, the batch comes from the
parameters). The ``floor`` row runs the same dynamics in a bare torch loop, without
any environment machinery. Set ``BENCH_PENDULUM_BATCH`` to change the batched size.
"""

from __future__ import annotations

import math
import os

import torch

from _harness import Context, Workload, run

STEPS = 1000
BATCH = int(os.environ.get("BENCH_PENDULUM_BATCH", "64"))


def pendulum_rollout(batch: int):
    def setup(ctx: Context):
        env = ctx.lib.envs.PendulumEnv(seed=0, device=ctx.device)
        params = env.gen_params(batch_size=[batch] if batch else None, device=ctx.device)

        def rollout():
            return env.rollout(STEPS, tensordict=env.reset(params.clone()))

        return rollout

    return setup


def floor_rollout(batch: int):
    """The same Euler pendulum with a random torque, as a bare torch loop."""

    def setup(ctx: Context):
        shape = (batch,) if batch else ()
        g, m, length, dt, max_speed, max_torque = 10.0, 1.0, 1.0, 0.05, 8.0, 2.0

        def rollout():
            th = torch.rand(shape, device=ctx.device) * 2 * math.pi - math.pi
            thdot = torch.rand(shape, device=ctx.device) * 2 - 1
            rewards = []
            for _ in range(STEPS):
                u = (torch.rand(shape, device=ctx.device) * 2 - 1) * max_torque
                norm = torch.remainder(th + math.pi, 2 * math.pi) - math.pi
                rewards.append(-(norm**2 + 0.1 * thdot**2 + 0.001 * u**2))
                thdot = (
                    thdot + (3 * g / (2 * length) * th.sin() + 3.0 / (m * length**2) * u) * dt
                ).clamp(-max_speed, max_speed)
                th = th + thdot * dt
            return torch.stack(rewards, -1)

        return rollout

    return setup


WORKLOADS = [
    Workload(
        f"PendulumEnv.rollout({STEPS}) batch {label}",
        setups={
            "rl_stack": pendulum_rollout(batch),
            "torchrl": pendulum_rollout(batch),
            "floor": floor_rollout(batch),
        },
        items=STEPS * max(batch, 1),
        unit="steps",
        devices=("cpu", "cuda"),
    )
    for batch, label in ((0, "[]"), (BATCH, f"[{BATCH}]"))
]

if __name__ == "__main__":
    run(WORKLOADS)
