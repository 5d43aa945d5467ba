"""MultiThreadedEnv("CartPole-v1") env-steps/s at 8 and 32 envs: ours vs TorchRL 0.14 vs raw EnvPool.

One workload per batch size, written once against the documented API: build
``MultiThreadedEnv(num_envs, "CartPole-v1")`` and time
``env.rollout(STEPS, break_when_any_done=False)`` with the built-in random policy, so
the explicit per-env resets that keep EnvPool's auto-reset out of the data are part of
the measure. The raw peer steps ``envpool.make(..., env_type="gymnasium")`` with
random numpy actions and lets EnvPool auto-reset (it needs no reset call, and its data
includes the ignored-action steps). Target: within 1.5x of raw EnvPool.

The ``floor`` row is the raw loop plus the one thing a TED rollout cannot do without:
resetting the envs a step finished (``env.reset(env_ids)``), so that no step whose
action EnvPool ignores becomes a transition. Numpy only, no tensor: ``floor/envpool``
bounds from above what any rollout that keeps auto-reset steps out of the data can
reach against the raw loop.

TorchRL 0.14 builds its EnvPool specs through the legacy ``gym`` package; its setup
aliases ``gym`` to gymnasium in ``sys.modules`` (the peer venv has no ``gym``).
Set ``BENCH_ENVPOOL_STEPS`` to change the rollout length.
"""

from __future__ import annotations

import os
import sys

from _harness import Context, Workload, run

STEPS = int(os.environ.get("BENCH_ENVPOOL_STEPS", "500"))
ENV_ID = "CartPole-v1"
SIZES = (8, 32)


def multithreaded_rollout(num_envs: int):
    def setup(ctx: Context):
        if ctx.name == "torchrl" and "gym" not in sys.modules:
            import gymnasium

            sys.modules["gym"] = gymnasium  # TorchRL 0.14 imports gym for its envpool specs
        env = ctx.lib.envs.MultiThreadedEnv(num_envs, ENV_ID, create_env_kwargs={"seed": 0})
        return lambda: env.rollout(STEPS, break_when_any_done=False)

    return setup


def _raw_pool(num_envs: int):
    """A raw gymnasium-style EnvPool pool, reset, and ``STEPS`` random numpy actions."""
    import envpool
    import numpy as np

    env = envpool.make(ENV_ID, env_type="gymnasium", num_envs=num_envs, seed=0)
    env.reset()
    rng = np.random.default_rng(0)
    return env, [rng.integers(0, 2, num_envs, dtype=np.int32) for _ in range(STEPS)]


def raw_envpool_loop(num_envs: int):
    def setup(ctx: Context):
        env, actions = _raw_pool(num_envs)
        step = env.step

        def loop():
            for action in actions:
                step(action)

        return loop

    return setup


def step_and_reset_floor(num_envs: int):
    def setup(ctx: Context):
        import numpy as np

        env, actions = _raw_pool(num_envs)
        step, reset = env.step, env.reset

        def loop():
            for action in actions:
                _, _, terminated, truncated, _ = step(action)
                finished = np.flatnonzero(terminated | truncated)
                if len(finished):
                    reset(finished)

        return loop

    return setup


WORKLOADS = [
    Workload(
        f"MultiThreadedEnv({n}, '{ENV_ID}').rollout({STEPS})",
        setups={
            "rl_stack": multithreaded_rollout(n),
            "torchrl": multithreaded_rollout(n),
            "floor": step_and_reset_floor(n),
            "envpool": raw_envpool_loop(n),
        },
        items=STEPS * n,
        unit="env-steps",
    )
    for n in SIZES
]

if __name__ == "__main__":
    run(WORKLOADS)
