"""GymEnv("CartPole-v1").rollout(1000) steps/s: ours vs TorchRL 0.14 vs a raw gymnasium loop.

One workload, written once against the documented API: build ``GymEnv("CartPole-v1")``,
seed it, and time ``env.rollout(1000, break_when_any_done=False)`` with the built-in
random policy (so episode ends and partial resets are part of the measure). The raw
peer (``gymnasium``, in the peer venv) is the loop a user would write by hand:
``step(action_space.sample())`` and ``reset()`` when an episode ends, no tensors at
all. Target: within 3x of the raw loop.

The ``floor`` row is the least work the documented output needs, in plain torch with
no framework: per step, a one-hot action drawn with ``torch.randint``, the gym step, the
observation, reward and three done flags as tensors in two tensordicts (the root and
``"next"``), a fresh root after a reset, and the steps stacked by chunks at the end (as
``rollout`` does). No spec, policy call, check or key lookup. ``ours/floor`` is the
framework's own cost; ``floor/gymnasium`` is what a TED rollout costs on top of the raw
loop whatever the framework.
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


def ted_floor(ctx: Context):
    import gymnasium
    import numpy as np
    import torch
    from tensordict import TensorDict

    from rl_envs_core._stack import RolloutSteps  # the chunked stacking rollout uses

    env = gymnasium.make(ENV_ID)
    env.reset(seed=0)
    batch = torch.Size([])

    def first_root() -> dict:
        obs, _ = env.reset()
        flag = torch.zeros(1, dtype=torch.bool)
        return {
            "observation": torch.from_numpy(obs),
            "done": flag,
            "terminated": flag.clone(),
            "truncated": flag.clone(),
        }

    def loop():
        steps, root = RolloutSteps(), first_root()
        for _ in range(STEPS):
            index = int(torch.randint(0, 2, ()))
            action = np.zeros(2, dtype=bool)
            action[index] = True
            root["action"] = torch.from_numpy(action)
            obs, reward, terminated, truncated, _ = env.step(index)
            done = terminated or truncated
            nxt = {
                "observation": torch.from_numpy(obs),
                "reward": torch.from_numpy(np.array([reward], dtype=np.float32)),
                "done": torch.from_numpy(np.array([done])),
                "terminated": torch.from_numpy(np.array([terminated])),
                "truncated": torch.from_numpy(np.array([truncated])),
            }
            root["next"] = TensorDict._new_unsafe(nxt, batch_size=batch)
            steps.append(TensorDict._new_unsafe(root, batch_size=batch))
            if done:
                root = first_root()
            else:
                root = {key: value for key, value in nxt.items() if key != "reward"}
        return steps.stack()

    return loop


WORKLOADS = [
    Workload(
        f"GymEnv('{ENV_ID}').rollout({STEPS})",
        setups={
            "rl_stack": gym_env_rollout,
            "torchrl": gym_env_rollout,
            "floor": ted_floor,
            "gymnasium": raw_gymnasium_loop,
        },
        items=STEPS,
        unit="steps",
    ),
]

if __name__ == "__main__":
    run(WORKLOADS)
