"""Rollout throughput (base-env steps/s) under MultiAction, Hash, BatchSizeTransform and VideoRecorder.

Question: what do these transforms cost in a rollout, against TorchRL 0.14 and
against the bare rollout of the same env? Workloads are written once against the
documented API on a counting env (never done), at batch ``[]`` and ``[16]``:

- MultiAction: ``rollout(250)`` with 4 stacked actions per step (1000 base steps);
- Hash: ``Hash(in_keys=["observation"], out_keys=["hash"])``, ``rollout(1000)``, with
  the default hash function (SHA-256 of the value's text: one unbatched value) and
  with a vectorised ``hash_fn`` (a multiplicative hash of the float bits);
- BatchSizeTransform: batch ``[16]`` seen as ``[4, 4]`` (``reshape_fn``), ``rollout(1000)``;
- VideoRecorder: 84x84x3 uint8 frames, every frame kept (``skip=1``), ``rollout(1000)``;
  the frames are dropped after each rollout.

The ``floor`` row is the bare ``rollout(1000)`` of the same env with rl_stack (for
MultiAction: 1000 single-action steps), so ``ours/floor`` is the transform's share.
The ``hash_fn`` rows come twice: the second time the floor is the least work of the
documented output, the same env writing ``hash_fn(observation)`` at ``"hash"`` itself
(no transform); TorchRL's rate in the first row over this floor is the best ratio any
Hash transform could reach against TorchRL.

The recording overhead is also measured per step, side by side with the pixel
env's bare step: "VideoRecorder per frame vs pixel env step" times 1000 recorder
calls on one step's output (``rl_stack``, ``torchrl``; the frames dropped after
each 1000) against 1000 ``env.step`` calls of the bare pixel env (``floor``). Its
``ours/floor`` is (env step time) / (recording time), so the overhead per step is
``1 / (ours/floor)``: the 20% target reads ``ours/floor >= 5``.
"""

from __future__ import annotations

import importlib
import os

import torch
from tensordict import TensorDict

from _harness import Context, Workload, run

STEPS = 1000
CHUNK = 4
BATCH = int(os.environ.get("BENCH_TRANSFORMS_BATCH", "16"))


def make_env(envs, data, batch: int, pixels: bool = False, device: str = "cpu", hash_fn=None):
    """A counting env (optionally with 84x84x3 pixels) built from the library's EnvBase.

    With ``hash_fn`` the env itself writes ``hash_fn(observation)`` at ``"hash"``: the
    documented output of ``Hash(["observation"], ["hash"], hash_fn=...)`` with no transform.
    """
    shape = torch.Size([batch] if batch else [])

    class CountingEnv(envs.EnvBase):
        def __init__(self):
            super().__init__(device=device, batch_size=shape)
            obs = {"observation": data.Unbounded(shape=(*shape, 1))}
            if pixels:
                obs["pixels"] = data.Bounded(0, 255, shape=(*shape, 84, 84, 3), dtype=torch.uint8)
            if hash_fn is not None:
                obs["hash"] = data.Unbounded(shape=(*shape, 1), dtype=torch.int64)
            self.observation_spec = data.Composite(obs, shape=shape)
            self.action_spec = data.Categorical(2, shape=(*shape, 1))
            self.reward_spec = data.Unbounded(shape=(*shape, 1))
            self.count = torch.zeros((*shape, 1))
            self.falses = torch.zeros((*shape, 1), dtype=torch.bool)
            self.ones = torch.ones((*shape, 1))
            self.frame = torch.zeros((*shape, 84, 84, 3), dtype=torch.uint8)

        def _output(self):
            out = {
                "observation": self.count.clone(),
                "done": self.falses.clone(),
                "terminated": self.falses.clone(),
                "truncated": self.falses.clone(),
            }
            if pixels:
                out["pixels"] = self.frame.fill_(int(self.count.flatten()[0]) % 256).clone()
            if hash_fn is not None:
                out["hash"] = hash_fn(out["observation"])
            return out

        def _reset(self, tensordict=None, **kwargs):
            self.count.zero_()
            return TensorDict(self._output(), batch_size=shape)

        def _step(self, tensordict):
            self.count += 1
            out = self._output()
            out["reward"] = self.ones.clone()
            return TensorDict(out, batch_size=shape)

        def _set_seed(self, seed):
            return seed

    # _step reports "truncated" too; declared once built (TorchRL completes the
    # done specs after __init__, so it cannot be declared inside it)
    return CountingEnv().add_truncated_keys()


def knuth_hash(value: torch.Tensor) -> torch.Tensor:
    """A vectorised multiplicative hash of float32 values (their bits)."""
    return value.view(torch.int32).to(torch.int64) * 2654435761 % 4294967296


def _policy(batch: int, chunk: int | None):
    shape = (*([batch] if batch else []), *([chunk] if chunk else []), 1)
    action = torch.zeros(shape, dtype=torch.int64)

    def policy(td):
        return td.set("action", action.clone())

    return policy


def transformed_setup(batch: int, kind: str):
    def setup(ctx: Context):
        envs, data = ctx.lib.envs, ctx.lib.data
        env = make_env(envs, data, batch, pixels=kind == "video")
        steps, policy = STEPS, _policy(batch, None)
        recorder = None
        if kind == "multiaction":
            env = envs.TransformedEnv(env, envs.MultiAction())
            steps, policy = STEPS // CHUNK, _policy(batch, CHUNK)
        elif kind == "hash":  # the default hash: SHA-256 of each value's text
            env = envs.TransformedEnv(env, envs.Hash(in_keys=["observation"], out_keys=["hash"]))
        elif kind == "hash_fn":
            hashing = envs.Hash(in_keys=["observation"], out_keys=["hash"], hash_fn=knuth_hash)
            env = envs.TransformedEnv(env, hashing)
        elif kind == "batchsize":
            env = envs.TransformedEnv(
                env, envs.BatchSizeTransform(reshape_fn=lambda td: td.reshape(4, BATCH // 4))
            )
            policy = _policy(0, None)
            shape = (4, BATCH // 4, 1)
            action = torch.zeros(shape, dtype=torch.int64)
            policy = lambda td: td.set("action", action.clone())  # noqa: E731
        elif kind == "video":
            record = importlib.import_module(f"{ctx.name}.record")
            recorder = record.VideoRecorder(None, "bench", in_keys=["pixels"], skip=1)
            env = envs.TransformedEnv(env, recorder)
        env.rollout(3, policy)

        def rollout():
            out = env.rollout(steps, policy)
            if recorder is not None:
                recorder.obs.clear()
            return out

        return rollout

    return setup


def bare_setup(batch: int, pixels: bool, hash_fn=None):
    """The bare rollout(1000) of the same env with rl_stack: the reference.

    With ``hash_fn``, the env writes the hash itself: the least work of Hash's output.
    """

    def setup(ctx: Context):
        envs = importlib.import_module("rl_stack.envs")
        data = importlib.import_module("rl_stack.data")
        env = make_env(envs, data, batch, pixels=pixels, hash_fn=hash_fn)
        policy = _policy(batch, None)
        env.rollout(3, policy)
        return lambda: env.rollout(STEPS, policy)

    return setup


def recorder_setup(batch: int):
    """1000 VideoRecorder calls on one step's output of the pixel env."""

    def setup(ctx: Context):
        envs, data = ctx.lib.envs, ctx.lib.data
        env = make_env(envs, data, batch, pixels=True)
        next_td = env.step(_policy(batch, None)(env.reset()))["next"]
        record = importlib.import_module(f"{ctx.name}.record")
        recorder = record.VideoRecorder(None, "bench", in_keys=["pixels"], skip=1)

        def record_steps():
            for _ in range(STEPS):
                recorder(next_td)
            recorder.obs.clear()

        return record_steps

    return setup


def pixel_step_setup(batch: int):
    """1000 ``env.step`` calls of the bare pixel env with rl_stack: the reference."""

    def setup(ctx: Context):
        envs = importlib.import_module("rl_stack.envs")
        data = importlib.import_module("rl_stack.data")
        env = make_env(envs, data, batch, pixels=True)
        td = _policy(batch, None)(env.reset())

        def steps():
            for _ in range(STEPS):
                env.step(td)

        return steps

    return setup


def _workloads():
    out = []
    cases = [
        ("multiaction", f"MultiAction ({CHUNK} actions/step)"),
        ("hash", "Hash(observation) default hash"),
        ("hash_fn", "Hash(observation) vectorised hash_fn"),
        ("batchsize", f"BatchSizeTransform [{BATCH}] -> [4, {BATCH // 4}]"),
        ("video", "VideoRecorder 84x84x3 skip=1"),
    ]
    for kind, label in cases:
        batches = ((0, "[]"), (BATCH, f"[{BATCH}]"))
        if kind == "batchsize":
            batches = batches[1:]
        elif kind == "hash":  # the default hash reads the text of one value: unbatched only
            batches = batches[:1]
        for batch, blabel in batches:
            setup = transformed_setup(batch, kind)
            out.append(
                Workload(
                    f"rollout {label} batch {blabel}",
                    setups={
                        "rl_stack": setup,
                        "torchrl": setup,
                        "floor": bare_setup(batch, kind == "video"),
                    },
                    items=STEPS * max(batch, 1),
                    unit="steps",
                )
            )
            if kind == "hash_fn":  # against the least work of the same output
                out.append(
                    Workload(
                        f"rollout {label} batch {blabel} vs the env writing the hash itself",
                        setups={"rl_stack": setup, "floor": bare_setup(batch, False, knuth_hash)},
                        items=STEPS * max(batch, 1),
                        unit="steps",
                    )
                )
    for batch, blabel in ((0, "[]"), (BATCH, f"[{BATCH}]")):
        out.append(
            Workload(
                f"VideoRecorder per frame vs pixel env step, 84x84x3 batch {blabel}",
                setups={
                    "rl_stack": recorder_setup(batch),
                    "torchrl": recorder_setup(batch),
                    "floor": pixel_step_setup(batch),
                },
                items=STEPS,
                unit="calls",
            )
        )
    return out


WORKLOADS = _workloads()

if __name__ == "__main__":
    run(WORKLOADS)
