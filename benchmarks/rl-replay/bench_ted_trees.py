"""MultiStep, the TED converters and MCTSForest: ours beside TorchRL 0.14 and plain h5py.

Questions answered:

* ``MultiStep(0.99, 3)`` over a ``[64, 1000]`` TED (observation float32[17], a done
  every ~100 steps): steps/s, ours and TorchRL.
* ``TED2Flat`` then ``Flat2TED`` round trip of 1M transitions of an
  observation-dominated TED (observation float32[64]): transitions/s, ours and TorchRL;
  the printed notes give the flat form's bytes over the TED's.
* ``H5Split`` then ``H5Combine`` of the same 1M transitions (uncompressed): transitions/s,
  ours and the ``floor``: every leaf of the TED written to and read back from one
  h5py dataset each.
* ``MCTSForest``: ``extend`` with 10k rollouts of depth 20 (4 actions, a tree of
  states), then ``get_tree`` of their common root: steps/s, ours and TorchRL.

Sizes: ``BENCH_TED_TRANSITIONS`` (default 1,000,000), ``BENCH_FOREST_ROLLOUTS``
(default 10,000), ``BENCH_FOREST_DEPTH`` (default 20). TorchRL's forest takes minutes
at the default size: run this file with ``--repeats 1``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import torch

from _harness import Context, Workload, run

TRANSITIONS = int(os.environ.get("BENCH_TED_TRANSITIONS", "1000000"))
ROLLOUTS = int(os.environ.get("BENCH_FOREST_ROLLOUTS", "10000"))
DEPTH = int(os.environ.get("BENCH_FOREST_DEPTH", "20"))
ENVS, STEPS = 64, 1000
FLAGS = ("done", "terminated", "truncated")


def _ted(batch: tuple[int, ...], obs_dim: int, every: int):
    """A TED whose next observation is the following root one, with a done every ``every`` steps."""
    from tensordict import TensorDict

    g = torch.Generator().manual_seed(0)
    *lead, steps = batch
    obs = torch.randn(*lead, steps + 1, obs_dim, generator=g)
    done = torch.zeros(*batch, 1, dtype=torch.bool)
    done[..., every - 1 :: every, :] = True
    nxt = obs[..., 1:, :]
    root = obs[..., :-1, :].clone()
    # after a done the next root observation is a reset one
    after = torch.cat([torch.zeros_like(done[..., :1, :]), done[..., :-1, :]], -2)
    root = torch.where(after, torch.randn(root.shape, generator=g), root)
    return TensorDict(
        {
            "observation": root,
            "action": torch.randn(*batch, 2, generator=g),
            **{flag: torch.zeros(*batch, 1, dtype=torch.bool) for flag in FLAGS},
            "next": {
                "observation": torch.where(done, nxt, torch.roll(root, -1, -2)),
                "reward": torch.randn(*batch, 1, generator=g),
                "done": done,
                "terminated": done.clone(),
                "truncated": torch.zeros_like(done),
            },
        },
        list(batch),
    )


# ---------------------------------------------------------------- MultiStep
def multistep(ctx: Context):
    data = _ted((ENVS, STEPS), 17, 100)
    ms = ctx.lib.data.MultiStep(0.99, 3)
    return lambda: ms(data)


# ---------------------------------------------------------------- TED2Flat / Flat2TED
def _ted_1m():
    return _ted((TRANSITIONS,), 64, 1000)


def flat_round_trip(ctx: Context):
    data = _ted_1m()
    to_flat, to_ted = ctx.lib.data.TED2Flat(), ctx.lib.data.Flat2TED()
    if ctx.name == "torchrl":  # its hook reads the storage cursor
        to_flat.shift, to_flat.is_full = TRANSITIONS, False
    flat = to_flat(data)
    nbytes = sum(
        v.numel() * v.element_size() for v in flat.values(True, True) if isinstance(v, torch.Tensor)
    )
    print(f"    [{ctx.name}] flat/TED bytes = {nbytes / data.bytes():.3f}")

    def step():
        return to_ted(to_flat(data))

    return step


# ---------------------------------------------------------------- H5
def h5_round_trip(ctx: Context):
    data = _ted_1m()
    path = Path(tempfile.mkdtemp()) / "ted.h5"
    split, combine = ctx.lib.data.H5Split(), ctx.lib.data.H5Combine()

    def step():
        split(data, path)
        return combine(path)

    return step


def h5_floor(ctx: Context):
    import h5py

    data = _ted_1m()
    path = Path(tempfile.mkdtemp()) / "plain.h5"
    leaves = {"/".join(k if isinstance(k, tuple) else (k,)): v for k, v in data.items(True, True)}

    def step():
        with h5py.File(path, "w") as file:
            for name, tensor in leaves.items():
                file.create_dataset(name, data=tensor.numpy())
        with h5py.File(path, "r") as file:
            return {name: torch.from_numpy(file[name][()]) for name in leaves}

    return step


# ---------------------------------------------------------------- MCTSForest
def _rollouts():
    from tensordict import TensorDict

    g = torch.Generator().manual_seed(0)
    actions = torch.randint(0, 4, (ROLLOUTS, DEPTH), generator=g)
    # state ids of a 4-ary tree: s' = 4 s + a + 1 (exact in float64 up to depth 20 is not
    # needed: states are hashed, and int64 wraps identically in both libraries)
    states = torch.zeros(ROLLOUTS, DEPTH + 1, dtype=torch.int64)
    for t in range(DEPTH):
        states[:, t + 1] = states[:, t] * 4 + actions[:, t] + 1
    out = []
    for i in range(ROLLOUTS):
        out.append(
            TensorDict(
                {
                    "observation": states[i, :-1].unsqueeze(-1),
                    "action": actions[i].unsqueeze(-1),
                    "done": torch.zeros(DEPTH, 1, dtype=torch.bool),
                    "next": {
                        "observation": states[i, 1:].unsqueeze(-1),
                        "reward": torch.ones(DEPTH, 1),
                        "done": torch.zeros(DEPTH, 1, dtype=torch.bool),
                    },
                },
                [DEPTH],
            )
        )
    return out


def forest(ctx: Context):
    rollouts = _rollouts()
    root = rollouts[0][0]

    def step():
        f = ctx.lib.data.MCTSForest(max_size=ROLLOUTS * DEPTH)
        for r in rollouts:
            f.extend(r)
        return f.get_tree(root)

    return step


WORKLOADS = [
    Workload(
        f"MultiStep(0.99, 3) over a [{ENVS}, {STEPS}] TED",
        setups={"rl_stack": multistep, "torchrl": multistep},
        items=ENVS * STEPS,
        unit="steps",
    ),
    Workload(
        f"TED2Flat + Flat2TED round trip, {TRANSITIONS} transitions, obs float32[64]",
        setups={"rl_stack": flat_round_trip, "torchrl": flat_round_trip},
        items=TRANSITIONS,
        unit="transitions",
    ),
    Workload(
        f"H5Split + H5Combine round trip, {TRANSITIONS} transitions (floor: plain h5py per leaf)",
        setups={"rl_stack": h5_round_trip, "floor": h5_floor},
        items=TRANSITIONS,
        unit="transitions",
    ),
    Workload(
        f"MCTSForest extend {ROLLOUTS} rollouts of depth {DEPTH} + get_tree(root)",
        setups={"rl_stack": forest, "torchrl": forest},
        items=ROLLOUTS * DEPTH,
        unit="steps",
    ),
]

if __name__ == "__main__":
    run(WORKLOADS)
