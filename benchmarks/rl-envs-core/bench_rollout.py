"""EnvBase framework overhead (steps/s): rollout and step_and_maybe_reset, ours vs TorchRL 0.14.

The env is a trivial counter (the observation counts the steps since the reset, the
reward is one, done after ``EPISODE`` steps), written once against the documented
``EnvBase`` API, so that nearly all the time measured is the framework's: key
handling, TED bookkeeping, ``step_mdp``, partial resets and the final stack.

Workloads: ``env.rollout(1000, break_when_any_done=False)`` with the built-in random
policy on batch ``[]`` and ``[32]``, and a hand-written loop of 1000
``env.step_and_maybe_reset`` calls on batch ``[]``. Set ``BENCH_ROLLOUT_BATCH`` to
change the batched size and ``BENCH_ROLLOUT_EPISODE`` the episode length.
"""

from __future__ import annotations

import os

import torch
from tensordict import TensorDict

from _harness import Context, Workload, run

STEPS = 1000
BATCH = int(os.environ.get("BENCH_ROLLOUT_BATCH", "32"))
EPISODE = int(os.environ.get("BENCH_ROLLOUT_EPISODE", "200"))


def make_counting_env(ctx: Context, batch_size: tuple[int, ...]):
    """The counting env, built on ``ctx.lib``'s ``EnvBase`` and specs."""
    envs, data = ctx.lib.envs, ctx.lib.data

    class CountingEnv(envs.EnvBase):
        def __init__(self):
            super().__init__(batch_size=batch_size, device=ctx.device)
            shape = (*batch_size, 1)
            self.observation_spec = data.Composite(
                observation=data.Unbounded(shape=shape), shape=batch_size
            )
            self.action_spec = data.Categorical(2, shape=shape)
            self.reward_spec = data.Unbounded(shape=shape)
            self.count = torch.zeros(shape, device=ctx.device)

        def _output(self, done):
            return TensorDict(
                {
                    "observation": self.count,
                    "done": done,
                    "terminated": done.clone(),
                    "truncated": torch.zeros_like(done),
                },
                batch_size=batch_size,
                device=ctx.device,
            )

        def _reset(self, tensordict=None, **kwargs):
            reset = tensordict.get("_reset", None) if tensordict is not None else None
            if reset is None:
                self.count = torch.zeros_like(self.count)
            else:
                self.count = torch.where(reset.reshape(self.count.shape), 0, self.count)
            return self._output(torch.zeros_like(self.count, dtype=torch.bool))

        def _step(self, tensordict):
            self.count = self.count + 1
            out = self._output(self.count >= EPISODE)
            out.set("reward", torch.ones(self.count.shape, device=ctx.device))
            return out

        def _set_seed(self, seed):
            self.seed = seed

    # _step reports "truncated" too; declared once built (TorchRL completes the
    # done specs after __init__, so it cannot be declared inside it)
    return CountingEnv().add_truncated_keys()


def rollout(batch: int):
    def setup(ctx: Context):
        env = make_counting_env(ctx, (batch,) if batch else ())
        env.set_seed(0)
        return lambda: env.rollout(STEPS, break_when_any_done=False)

    return setup


def step_and_maybe_reset_loop(ctx: Context):
    env = make_counting_env(ctx, ())
    env.set_seed(0)

    def loop():
        data_ = env.reset()
        result = []
        for _ in range(STEPS):
            data, data_ = env.step_and_maybe_reset(env.rand_action(data_))
            result.append(data)
        return torch.stack(result)

    return loop


BOTH = ("rl_stack", "torchrl")
WORKLOADS = [
    Workload(
        "EnvBase.rollout(1000), counting env, batch []",
        setups=dict.fromkeys(BOTH, rollout(0)),
        items=STEPS,
        unit="steps",
    ),
    Workload(
        f"EnvBase.rollout(1000), counting env, batch [{BATCH}]",
        setups=dict.fromkeys(BOTH, rollout(BATCH)),
        items=STEPS,
        unit="steps",
    ),
    Workload(
        "step_and_maybe_reset loop x1000, counting env, batch []",
        setups=dict.fromkeys(BOTH, step_and_maybe_reset_loop),
        items=STEPS,
        unit="steps",
    ),
]

if __name__ == "__main__":
    run(WORKLOADS)
