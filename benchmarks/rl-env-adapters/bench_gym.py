"""GymEnv("CartPole-v1").rollout(1000) steps/s: ours vs TorchRL 0.14 vs a raw gymnasium loop.

One workload, written once against the documented API: build ``GymEnv("CartPole-v1")``,
seed it, and time ``env.rollout(1000, break_when_any_done=False)`` with the built-in
random policy (so episode ends and partial resets are part of the measure). The raw
peer is the loop a user would write by hand: ``step(action_space.sample())`` and
``reset()`` when an episode ends, no tensors at all; it runs as ``floor`` in our
environment and as ``gymnasium`` in the peer venv. Target: within 3x of the raw loop.
Set ``BENCH_GYM_STEPS`` to change the rollout length.
"""

from __future__ import annotations

import os

from _harness import Context, Workload, run

STEPS = int(os.environ.get("BENCH_GYM_STEPS", "1000"))
ENV_ID = "CartPole-v1"


def gym_env_rollout(ctx: Context):
    env = ctx.lib.envs.GymEnv(ENV_ID)
    env.set_seed(0)
    return lambda: env.rollout(STEPS, break_when_any_done=False)


def raw_gymnasium_loop(ctx: Context):
    import gymnasium

    env = gymnasium.make(ENV_ID)
    env.reset(seed=0)
    env.action_space.seed(0)
    sample, step, reset = env.action_space.sample, env.step, env.reset

    def loop():
        for _ in range(STEPS):
            _, _, terminated, truncated, _ = step(sample())
            if terminated or truncated:
                reset()

    return loop


WORKLOADS = [
    Workload(
        f"GymEnv('{ENV_ID}').rollout({STEPS})",
        setups={
            "rl_stack": gym_env_rollout,
            "torchrl": gym_env_rollout,
            "floor": raw_gymnasium_loop,
            "gymnasium": raw_gymnasium_loop,
        },
        items=STEPS,
        unit="steps",
    ),
]

if __name__ == "__main__":
    run(WORKLOADS)
