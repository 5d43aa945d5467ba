"""Batched envs: env-steps/s of serial, parallel and async batches, and ParallelEnv start-up.

Workloads (random actions, ``step_and_maybe_reset`` loops of ``STEPS`` batched steps):
8 and 32 ``CartPole-v1`` envs (through ``GymEnv``) and 8 counting envs (a minimal
``EnvBase`` written against each library's documented API), run by ``SerialEnv``,
``ParallelEnv`` and ``AsyncEnvPool`` (multiprocessing backend); ours vs TorchRL 0.14
(``mp_start_method="fork"``) and gymnasium's ``SyncVectorEnv`` /
``AsyncVectorEnv(shared_memory=True)`` on the same CartPole. Our ``ParallelEnv`` runs
its default layout (the sub-envs spread over one worker process per usable CPU); two
workloads fix the layout instead (4 envs per worker, one process per env). A last
workload times ``ParallelEnv(8, CartPole)`` start-up: construction, first reset and close.
``BENCH_BATCHED_STEPS`` changes the loop length (default 50).

``SerialEnv counting x8`` has a ``floor`` row: each counting env's own ``_step`` called
directly, its outputs stacked into preallocated rows with one ``torch.stack(out=)`` per
key, and a ``_reset`` of the envs that finished; no framework, no action sampling, no
``step_mdp``. The counting env is written against the public ``TensorDict`` API, so its
``_step`` costs the same in every library; ``floor/torchrl`` is the most any serial
batch of these envs can gain over TorchRL's.
"""

from __future__ import annotations

import os
from functools import partial

import torch

from _harness import Context, Workload, run

STEPS = int(os.environ.get("BENCH_BATCHED_STEPS", "50"))
_OPEN: list = []  # envs of the previous workload, closed before the next one starts


def _track(env):
    while _OPEN:
        _OPEN.pop().close()
    _OPEN.append(env)
    return env


def cartpole(ctx: Context):
    return partial(ctx.lib.envs.GymEnv, "CartPole-v1")  # picklable for spawn-based pools


def counting(ctx: Context):
    from tensordict import TensorDict

    envs, data = ctx.lib.envs, ctx.lib.data

    class Counting(envs.EnvBase):
        def __init__(self):
            super().__init__()
            self.observation_spec = data.Composite(observation=data.Unbounded(shape=(1,)))
            self.action_spec = data.Categorical(2, shape=(1,))
            self.reward_spec = data.Unbounded(shape=(1,))
            self.count = torch.zeros(1)

        def _out(self):
            done = self.count >= 100
            return TensorDict(
                observation=self.count.clone(),
                done=done,
                terminated=done.clone(),
                truncated=torch.zeros_like(done),
            )

        def _reset(self, tensordict=None, **kwargs):
            self.count.zero_()
            return self._out()

        def _step(self, tensordict):
            self.count += 1
            out = self._out()
            out["reward"] = torch.ones(1)
            return out

        def _set_seed(self, seed):
            return seed

    def make_counting():
        # _step reports "truncated" too; declared once built (TorchRL completes the
        # done specs after __init__, so it cannot be declared inside it)
        return Counting().add_truncated_keys()

    return make_counting


def counting_floor(n: int):
    """``n`` counting envs stepped with nothing but their ``_step``, a stack and resets."""

    def setup(ctx: Context):
        from types import SimpleNamespace

        from tensordict import TensorDict

        from rl_stack import data, envs

        make = counting(SimpleNamespace(lib=SimpleNamespace(envs=envs, data=data)))
        subs = [make() for _ in range(n)]
        for env in subs:
            env._reset()
        step_input = TensorDict({"action": torch.zeros(1, dtype=torch.long)}, [])
        keys = ("observation", "reward", "done", "terminated", "truncated")
        rows = {key: torch.zeros(n, 1) for key in keys[:2]}
        rows.update({key: torch.zeros(n, 1, dtype=torch.bool) for key in keys[2:]})

        def loop():
            for _ in range(STEPS):
                outs = [env._step(step_input) for env in subs]
                for key in keys:
                    torch.stack([out._tensordict[key] for out in outs], out=rows[key])
                if bool(rows["done"].any()):
                    for j in rows["done"].reshape(n).nonzero().reshape(-1).tolist():
                        subs[j]._reset()

        return loop

    return setup


def _kwargs(ctx: Context) -> dict:
    return {"mp_start_method": "fork"} if ctx.name == "torchrl" else {}


def batched(kind: str, n: int, factory, **extra):
    """``SerialEnv`` / ``ParallelEnv`` / ``AsyncEnvPool`` of ``n`` envs stepped ``STEPS`` times."""

    def setup(ctx: Context):
        make = factory(ctx)
        if kind == "AsyncEnvPool":
            env = ctx.lib.envs.AsyncEnvPool([make] * n, backend="multiprocessing")
        elif kind == "ParallelEnv":
            env = ctx.lib.envs.ParallelEnv(n, make, **_kwargs(ctx), **extra)
        else:
            env = ctx.lib.envs.SerialEnv(n, make)
        _track(env)
        state = {"td": env.reset()}

        def loop():
            td = state["td"]
            for _ in range(STEPS):
                _, td = env.step_and_maybe_reset(env.rand_action(td))
            state["td"] = td

        return loop

    return setup


def gym_vector(asynchronous: bool, n: int):
    """gymnasium's own vector envs on the same CartPole (autoreset inside)."""

    def setup(ctx: Context):
        import gymnasium as gym

        fns = [lambda: gym.make("CartPole-v1")] * n
        if asynchronous:
            env = gym.vector.AsyncVectorEnv(fns, shared_memory=True)
        else:
            env = gym.vector.SyncVectorEnv(fns)
        _track(env)
        env.reset(seed=0)

        def loop():
            for _ in range(STEPS):
                env.step(env.action_space.sample())

        return loop

    return setup


def startup(ctx: Context):
    make = cartpole(ctx)
    _track(type("Nothing", (), {"close": staticmethod(lambda: None)}))

    def start():
        env = ctx.lib.envs.ParallelEnv(8, make, **_kwargs(ctx))
        env.reset()
        env.close()

    return start


def gym_startup(ctx: Context):
    import gymnasium as gym

    def start():
        env = gym.vector.AsyncVectorEnv([lambda: gym.make("CartPole-v1")] * 8, shared_memory=True)
        env.reset(seed=0)
        env.close()

    return start


WORKLOADS = []
for n, label, factory in (
    (8, "CartPole-v1 x8", cartpole),
    (32, "CartPole-v1 x32", cartpole),
    (8, "counting x8", counting),
):
    gym_ok = factory is cartpole
    for kind in ("SerialEnv", "ParallelEnv", "AsyncEnvPool"):
        setups = {"rl_stack": batched(kind, n, factory), "torchrl": batched(kind, n, factory)}
        if gym_ok and kind != "AsyncEnvPool":
            setups["gymnasium"] = gym_vector(kind == "ParallelEnv", n)
        if not gym_ok and kind == "SerialEnv":
            setups["floor"] = counting_floor(n)
        WORKLOADS.append(
            Workload(f"{kind} {label}", setups=setups, items=STEPS * n, unit="env-steps")
        )
WORKLOADS.append(
    Workload(
        "ParallelEnv CartPole-v1 x32, 4 envs per worker (gymnasium: AsyncVectorEnv x32)",
        setups={
            "rl_stack": batched("ParallelEnv", 32, cartpole, num_envs_per_worker=4),
            "gymnasium": gym_vector(True, 32),
        },
        items=STEPS * 32,
        unit="env-steps",
    )
)
WORKLOADS.append(
    Workload(
        "ParallelEnv CartPole-v1 x8, one process per env (ours: num_envs_per_worker=1)",
        setups={
            "rl_stack": batched("ParallelEnv", 8, cartpole, num_envs_per_worker=1),
            "torchrl": batched("ParallelEnv", 8, cartpole),
            "gymnasium": gym_vector(True, 8),
        },
        items=STEPS * 8,
        unit="env-steps",
    )
)
WORKLOADS.append(
    Workload(
        "ParallelEnv(8) CartPole-v1 start-up + reset + close",
        setups={"rl_stack": startup, "torchrl": startup, "gymnasium": gym_startup},
        unit="starts",
    )
)

if __name__ == "__main__":
    try:
        run(WORKLOADS)
    finally:
        _track(type("Nothing", (), {"close": staticmethod(lambda: None)}))
