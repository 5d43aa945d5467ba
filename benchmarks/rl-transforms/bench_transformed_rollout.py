"""TransformedEnv rollout throughput (steps/s): ours vs TorchRL 0.14, and the bare env.

Question: what does a chain of transforms cost per step? Workloads run
``env.rollout(1000)`` on a counting env (its observation counts the steps; never
done) written once against the documented ``EnvBase`` API, at batch ``[]`` and
``[16]``:

- bare: the counting env alone (the reference for the transform overhead);
- bookkeeping: ``Compose(StepCounter(), RewardSum(), DoubleToFloat(),
  ObservationNorm(loc=0., scale=1.))``;
- pixels: the env also emits 84x84 uint8 ``"pixels"`` (``[1, 84, 84]``), bare and
  under ``CatFrames(4, dim=-3, in_keys=["pixels"])``.

The frame-stacking rows are bound by memory traffic: a rollout of 1000 steps at batch
``[16]`` stacks 2 x 1000 x ``[16, 4, 84, 84]`` uint8 frames (root and ``"next"``), about
900 MB, at the end. Their ``floor`` rows time that memory work alone in plain torch
(frames, stacks, the two final stacks; no env). Set ``BENCH_TRANSFORMS_BATCH`` to
change the batched size.
"""

from __future__ import annotations

import os

import torch
from tensordict import TensorDict

from _harness import Context, Workload, run

STEPS = 1000
BATCH = int(os.environ.get("BENCH_TRANSFORMS_BATCH", "16"))


def make_counting_env(ctx: Context, batch: int, pixels: bool):
    """A counting env (optionally with pixels) built from the library's EnvBase and specs."""
    envs, data = ctx.lib.envs, ctx.lib.data
    shape = torch.Size([batch] if batch else [])

    class CountingEnv(envs.EnvBase):
        def __init__(self):
            super().__init__(device=ctx.device, batch_size=shape)
            obs = {"observation": data.Unbounded(shape=(*shape, 1))}
            if pixels:
                obs["pixels"] = data.Bounded(0, 255, shape=(*shape, 1, 84, 84), dtype=torch.uint8)
            self.observation_spec = data.Composite(obs, shape=shape)
            self.action_spec = data.Categorical(2, shape=(*shape, 1))
            self.reward_spec = data.Unbounded(shape=(*shape, 1))
            self.count = torch.zeros((*shape, 1), device=ctx.device)
            self.falses = torch.zeros((*shape, 1), dtype=torch.bool, device=ctx.device)
            self.ones = torch.ones((*shape, 1), device=ctx.device)

        def _output(self):
            out = {
                "observation": self.count.clone(),
                "done": self.falses.clone(),
                "terminated": self.falses.clone(),
                "truncated": self.falses.clone(),
            }
            if pixels:
                value = int(self.count.flatten()[0]) % 256
                out["pixels"] = torch.full(
                    (*shape, 1, 84, 84), value, dtype=torch.uint8, device=ctx.device
                )
            return out

        def _reset(self, tensordict=None, **kwargs):
            self.count.zero_()
            return TensorDict(self._output(), batch_size=shape, device=ctx.device)

        def _step(self, tensordict):
            self.count += 1
            out = self._output()
            out["reward"] = self.ones.clone()
            return TensorDict(out, batch_size=shape, device=ctx.device)

        def _set_seed(self, seed):
            return seed

    # _step reports "truncated" too; declared once built (TorchRL completes the
    # done specs after __init__, so it cannot be declared inside it)
    return CountingEnv().add_truncated_keys()


def rollout_setup(batch: int, chain: str):
    def setup(ctx: Context):
        envs = ctx.lib.envs
        env = make_counting_env(ctx, batch, pixels=chain.startswith("pixels"))
        if chain == "bookkeeping":
            env = envs.TransformedEnv(
                env,
                envs.Compose(
                    envs.StepCounter(),
                    envs.RewardSum(),
                    envs.DoubleToFloat(),
                    envs.ObservationNorm(loc=0.0, scale=1.0, in_keys=["observation"]),
                ),
            )
        elif chain == "pixels+catframes":
            env = envs.TransformedEnv(env, envs.CatFrames(4, dim=-3, in_keys=["pixels"]))
        env.rollout(3)

        def rollout():
            return env.rollout(STEPS)

        return rollout

    return setup


def pixels_floor(batch: int, frames: int):
    """Plain torch, no env: the memory work the documented pixel output implies.

    Per step one new frame and (with ``frames > 1``) one new stack of the last
    ``frames`` frames, the same tensor kept as ``"next"`` at t and as the root at
    t + 1; at the end, root and ``"next"`` each stacked along time (two outputs of
    ``STEPS x [batch, frames, 84, 84]`` uint8). A transformed rollout cannot beat it.
    """

    def setup(ctx: Context):
        shape = (*([batch] if batch else []), 1, 84, 84)
        dim = 1 if batch else 0

        def loop():
            frame = torch.zeros(shape, dtype=torch.uint8)
            obs = torch.cat([frame] * frames, -3)
            roots, nexts = [], []
            for i in range(STEPS):
                frame = torch.full(shape, (i + 1) % 256, dtype=torch.uint8)
                if frames > 1:
                    frame = torch.cat([obs.narrow(-3, 1, frames - 1), frame], -3)
                roots.append(obs)
                nexts.append(frame)
                obs = frame
            return torch.stack(roots, dim), torch.stack(nexts, dim)

        return loop

    return setup


def _setups(batch: int, chain: str) -> dict:
    setups = {"rl_stack": rollout_setup(batch, chain), "torchrl": rollout_setup(batch, chain)}
    if chain.startswith("pixels"):
        setups["floor"] = pixels_floor(batch, 4 if chain == "pixels+catframes" else 1)
    return setups


WORKLOADS = [
    Workload(
        f"counting env rollout({STEPS}) {chain} batch {label}",
        setups=_setups(batch, chain),
        items=STEPS * max(batch, 1),
        unit="steps",
    )
    for chain in ("bare", "bookkeeping", "pixels", "pixels+catframes")
    for batch, label in ((0, "[]"), (BATCH, f"[{BATCH}]"))
]

if __name__ == "__main__":
    run(WORKLOADS)
