"""Collector frames/s on CartPole: ours vs TorchRL 0.14 vs the raw simulator loops and floors.

Every workload builds a collector with ``total_frames=-1`` and a random policy
(``policy=None``; the rows "with a trivial policy": a ``TensorDictModule`` picking
the one-hot action from the sign of the pole angle) and times one batch (``next(iter(collector))``), written once
against the documented API (``Collector`` is the name both libraries export):

* ``Collector(GymEnv)``: one ``GymEnv("CartPole-v1")``, batches of 1000 frames. Raw
  peer: gymnasium's own step/reset loop with ``action_space.sample()`` (no tensors).
* ``Collector(MultiThreadedEnv(32))``: EnvPool, 32 envs, 100 steps per batch. Raw
  peer: EnvPool's own step loop (auto-reset, numpy actions).
* ``Collector(ParallelEnv(8, GymEnv))``: 100 steps per batch. Raw peer: gymnasium's
  ``SyncVectorEnv(8)`` stepping 100 times.
* ``Collector(SerialEnv(8, GymEnv))`` and ``MultiSyncCollector(2 workers x
  SerialEnv(4, GymEnv))``: the same 800 frames, from one process or from two
  workers (target: the two workers >= 1.5x the single collector on 2 cores).
* ``Collector(GymEnv) + replay_buffer``: the first workload writing each batch into a
  ``ReplayBuffer(LazyTensorStorage(100_000))`` (target: >= 0.8x without).

The ``floor`` rows are the least work the documented output needs, in numpy and
plain torch with no framework: one batch of random actions drawn at once, the
simulator's step (and the resets of finished envs) with its outputs written into
preallocated arrays, the root observation of each step taken from the previous
step's, trajectory ids from the done flags (new ids in step-then-env order), and
one ``TensorDict`` built over those arrays at the end (the one-hot action and the
``[env, time]`` layout included). ``ours/floor`` is the framework's own cost.
For EnvPool the floor resets finished envs through EnvPool's auto-reset inside
the next step call (each env: ``T`` steps plus one call slot per reset; no reset
round trip) and is time-major: each call's arrays kept as they come, the
``[env, time]`` rows gathered once per batch (see ``envpool_floor``). The 8-env rows (``ParallelEnv``, ``SerialEnv``, the two-worker
``MultiSyncCollector``) share one floor: the 8 gym envs stepped one after the
other in one process, so a row above 1x there gains from running envs in
parallel processes. The replay-buffer row's floor is the collection alone (the
buffer write is the cost that row measures).
The rows with a trivial policy have floors that run the same policy (one call per
step, on the step's root observation): for ``GymEnv`` the floor above with the
policy's actions instead of random ones; for EnvPool a lower bound, EnvPool's own
auto-reset loop driven by the policy until every env made its steps, recording
nothing (see ``envpool_policy_bound``). Their raw peers run no policy at all.
``BENCH_COLLECTOR_STEPS`` changes the steps per env per batch (default 100; the
single-env workloads run 10x that).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from functools import partial

from _collector_floors import (
    ProcessFloor,
    envpool_policy_bound,
    gym_batch_floor,
    gym_policy_floor,
    ids_from_done,
    ted,
)

from _harness import Context, Workload, run

STEPS = int(os.environ.get("BENCH_COLLECTOR_STEPS", "100"))
SINGLE = 10 * STEPS
ENV_ID = "CartPole-v1"
_OPEN: list = []  # the previous workload's collectors/envs, stopped before the next starts
_KEEP: list = []  # set while interleaving: a workload's libraries all stay open


def _track(*things):
    while _OPEN and not _KEEP:
        thing = _OPEN.pop(0)  # the collector first, then its env
        try:
            getattr(thing, "shutdown", getattr(thing, "close", None))()
        except Exception:  # an env its collector already closed may refuse a 2nd close
            pass
    _OPEN.extend(things)


def _collectors(ctx: Context):
    return importlib.import_module(f"{ctx.name}.collectors")


def _batches(collector):
    it = iter(collector)
    return lambda: next(it)


# ------------------------------------------------------------------ ours / TorchRL
def gym_collector(ctx: Context):
    env = ctx.lib.envs.GymEnv(ENV_ID)
    env.set_seed(0)
    collector = _collectors(ctx).Collector(env, None, frames_per_batch=SINGLE, total_frames=-1)
    _track(collector, env)
    return _batches(collector)


class _Trivial:
    """The trivial policy: action 0 or 1 from the sign of the pole angle (one-hot or index)."""

    def __init__(self, dtype, one_hot: bool):
        import torch

        self.torch, self.dtype, self.one_hot = torch, dtype, one_hot

    def __call__(self, observation):
        index = (observation[..., 2] > 0).long()
        if self.one_hot:
            return self.torch.nn.functional.one_hot(index, 2).to(self.dtype)
        return index.to(self.dtype)


def _trivial_policy(env):
    """A ``TensorDictModule`` reading ``"observation"`` and writing ``"action"``."""
    from tensordict.nn import TensorDictModule

    spec = env.action_spec
    module = _Trivial(spec.dtype, "OneHot" in type(spec).__name__)
    return TensorDictModule(module, in_keys=["observation"], out_keys=["action"])


def gym_collector_policy(ctx: Context):
    env = ctx.lib.envs.GymEnv(ENV_ID)
    env.set_seed(0)
    collector = _collectors(ctx).Collector(
        env, _trivial_policy(env), frames_per_batch=SINGLE, total_frames=-1
    )
    _track(collector, env)
    return _batches(collector)


def envpool_collector_policy(ctx: Context):
    if ctx.name == "torchrl" and "gym" not in sys.modules:
        import gymnasium

        sys.modules["gym"] = gymnasium
    env = ctx.lib.envs.MultiThreadedEnv(32, ENV_ID, create_env_kwargs={"seed": 0})
    collector = _collectors(ctx).Collector(
        env, _trivial_policy(env), frames_per_batch=32 * STEPS, total_frames=-1
    )
    _track(collector, env)
    return _batches(collector)


def gym_collector_with_buffer(ctx: Context):
    env = ctx.lib.envs.GymEnv(ENV_ID)
    env.set_seed(0)
    rb = ctx.lib.data.ReplayBuffer(storage=ctx.lib.data.LazyTensorStorage(100_000))
    collector = _collectors(ctx).Collector(
        env, None, frames_per_batch=SINGLE, total_frames=-1, replay_buffer=rb
    )
    _track(collector, env)
    return _batches(collector)


def envpool_collector(ctx: Context):
    if ctx.name == "torchrl" and "gym" not in sys.modules:
        import gymnasium

        sys.modules["gym"] = gymnasium  # TorchRL 0.14 imports gym for its envpool specs
    env = ctx.lib.envs.MultiThreadedEnv(32, ENV_ID, create_env_kwargs={"seed": 0})
    collector = _collectors(ctx).Collector(env, None, frames_per_batch=32 * STEPS, total_frames=-1)
    _track(collector, env)
    return _batches(collector)


def _make_cartpole(lib):
    return partial(lib.envs.GymEnv, ENV_ID)


def parallel_collector(ctx: Context):
    kwargs = {"mp_start_method": "fork"} if ctx.name == "torchrl" else {}
    env = ctx.lib.envs.ParallelEnv(8, _make_cartpole(ctx.lib), **kwargs)
    collector = _collectors(ctx).Collector(env, None, frames_per_batch=8 * STEPS, total_frames=-1)
    _track(collector, env)
    return _batches(collector)


def serial_collector(ctx: Context):
    env = ctx.lib.envs.SerialEnv(8, _make_cartpole(ctx.lib))
    collector = _collectors(ctx).Collector(env, None, frames_per_batch=8 * STEPS, total_frames=-1)
    _track(collector, env)
    return _batches(collector)


def _serial4(envs_module):
    return envs_module.SerialEnv(4, partial(envs_module.GymEnv, ENV_ID))


def _two_workers(ctx: Context, name: str, frames_per_batch: int):
    make = partial(_serial4, ctx.lib.envs)
    collector = getattr(_collectors(ctx), name)(
        [make, make], None, frames_per_batch=frames_per_batch, total_frames=-1
    )
    _track(collector)
    return _batches(collector)


def multi_sync_collector(ctx: Context):
    return _two_workers(ctx, "MultiSyncCollector", 8 * STEPS)


def multi_async_collector(ctx: Context):
    return _two_workers(ctx, "MultiAsyncCollector", 4 * STEPS)


# ------------------------------------------------------------------ raw loops
def raw_gymnasium_loop(ctx: Context):
    import gymnasium

    env = gymnasium.make(ENV_ID)
    env.reset(seed=0)
    env.action_space.seed(0)
    sample, step, reset = env.action_space.sample, env.step, env.reset

    def loop():
        for _ in range(SINGLE):
            _, _, terminated, truncated, _ = step(sample())
            if terminated or truncated:
                reset()

    return loop


def raw_envpool_loop(ctx: Context):
    import envpool
    import numpy as np

    env = envpool.make(ENV_ID, env_type="gymnasium", num_envs=32, seed=0)
    env.reset()
    rng = np.random.default_rng(0)
    step = env.step

    def loop():
        for action in rng.integers(0, 2, (STEPS, 32), dtype=np.int32):
            step(action)

    return loop


def raw_sync_vector_loop(ctx: Context):
    import gymnasium as gym

    env = gym.vector.SyncVectorEnv([lambda: gym.make(ENV_ID)] * 8)
    _track(env)
    env.reset(seed=0)
    env.action_space.seed(0)

    def loop():
        for _ in range(STEPS):
            env.step(env.action_space.sample())

    return loop


# ------------------------------------------------------------------ floors
def gym_floor(ctx: Context):
    return gym_batch_floor(1, SINGLE)


def parallel_floor(ctx: Context):
    return gym_batch_floor(8, STEPS)


def two_process_floor(ctx: Context):
    floor = ProcessFloor(2, 4, STEPS)
    _track(floor)
    return floor.sync


def two_process_async_floor(ctx: Context):
    floor = ProcessFloor(2, 4, STEPS)
    _track(floor)
    return floor.next_async


def gym_policy_floor_setup(ctx: Context):
    import torch

    return gym_policy_floor(SINGLE, _Trivial(torch.bool, True))  # GymEnv's OneHot


def envpool_policy_bound_setup(ctx: Context):
    import torch

    return envpool_policy_bound(32, STEPS, _Trivial(torch.int64, False))  # Categorical


def envpool_floor(ctx: Context):
    """EnvPool time-major: each call's outputs kept as they come, rows gathered once per batch.

    An env that finished is reset by its next call (EnvPool's auto-reset ignores
    that action: a reset call) and makes its step at the call after. While every env
    still needs steps, each call steps them all and its arrays are kept as EnvPool
    returns them (stacked once into call-major buffers, no indexing per call); then
    only the envs short of their ``T`` transitions are stepped (by ``env_id``). At the
    end one vectorised gather (the calls that were not reset calls, env-major) builds
    the ``[n, T]`` rows: a transition's root is its env's call before, its ``"next"``
    the call's output. The last observation and a reset still owed are carried to
    the next batch. The pool is called through its C++ ``_send`` / ``_recv``, as
    ours does (EnvPool's ``step`` adds Python conversions the output does not need).
    """
    import envpool
    import numpy as np
    import torch

    n = 32
    env = envpool.make(ENV_ID, env_type="gymnasium", num_envs=n, seed=0)
    first, _ = env.reset()
    keys = env._state_keys
    at_obs, at_reward, at_done, at_trunc = (
        keys.index(k) for k in ("obs", "reward", "done", "trunc")
    )
    send, recv = env._send, env._recv
    every = np.arange(n, dtype=np.int32)
    calls = 2 * STEPS + 1  # T steps, a reset call after each, one reset owed from before
    rec_obs = np.empty((calls + 1, n, 4), np.float32)
    rec_reward = np.empty((calls, n), np.float32)
    rec_done = np.empty((calls, n), bool)
    rec_trunc = np.empty((calls, n), bool)
    state = {"obs": first, "pending": np.zeros(n, bool), "ids": torch.arange(n), "next_id": n}

    def loop():
        actions = np.random.randint(0, 2, (calls, n)).astype(np.int32)
        rec_obs[0] = state["obs"]
        pending = state["pending"]
        # the call reset its env (the env's call before finished)
        reset = np.zeros((calls, n), bool)
        reset[0] = pending
        valid = np.zeros(n, np.int64)
        kept = ([], [], [], [])
        k = 0
        while (room := STEPS - int(valid.max())) > 0:  # every env needs steps: full calls
            for _ in range(room):
                send([every, every, actions[k]])
                out = recv()
                for dst, i in zip(kept, (at_obs, at_reward, at_done, at_trunc)):
                    dst.append(out[i])
                valid += ~pending
                pending = out[at_done]
                k += 1
        np.stack(kept[0], out=rec_obs[1 : k + 1])
        np.stack(kept[1], out=rec_reward[:k])
        np.stack(kept[2], out=rec_done[:k])
        np.stack(kept[3], out=rec_trunc[:k])
        count = np.full(n, k)
        while (short := valid < STEPS).any():  # the tail: only the envs short of T steps
            ids = every[short]
            c = count[ids]
            send([ids, ids, actions[c, ids]])
            out = recv()
            rec_obs[c + 1, ids] = out[at_obs]
            rec_reward[c, ids] = out[at_reward]
            rec_done[c, ids] = out[at_done]
            rec_trunc[c, ids] = out[at_trunc]
            valid[ids] += ~pending[ids]
            pending[ids] = out[at_done]
            count[ids] += 1
        made = np.arange(calls)[:, None] < count
        reset[1:] |= rec_done[:-1]
        env_of, call_of = np.nonzero((made & ~reset).T)  # env-major, in call order
        row = call_of * n + env_of
        obs = rec_obs.reshape(-1, 4)[row].reshape(n, STEPS, 4)
        next_obs = rec_obs.reshape(-1, 4)[row + n].reshape(n, STEPS, 4)
        reward = rec_reward.reshape(-1)[row].reshape(n, STEPS, 1)
        truncated = rec_trunc.reshape(-1)[row].reshape(n, STEPS, 1)
        terminated = rec_done.reshape(-1)[row].reshape(n, STEPS, 1) > truncated
        action = torch.from_numpy(actions.reshape(-1)[row].reshape(n, STEPS)).long()
        state["obs"] = rec_obs[count, every]
        state["pending"] = pending
        done = torch.from_numpy(terminated | truncated)[..., 0]
        ids, state["ids"], state["next_id"] = ids_from_done(done, state["ids"], state["next_id"])
        return ted(obs, next_obs, action, reward, terminated, truncated, ids, [n, STEPS])

    return loop


def _workload(name, setups, items):
    return Workload(f"collector: {name}", setups=setups, items=items, unit="frames")


WORKLOADS = [
    _workload(
        f"Collector(GymEnv('{ENV_ID}'), frames_per_batch={SINGLE})",
        {
            "rl_stack": gym_collector,
            "torchrl": gym_collector,
            "floor": gym_floor,
            "gymnasium": raw_gymnasium_loop,
        },
        SINGLE,
    ),
    _workload(
        f"Collector(GymEnv('{ENV_ID}'), frames_per_batch={SINGLE}) + replay_buffer",
        {
            "rl_stack": gym_collector_with_buffer,
            "torchrl": gym_collector_with_buffer,
            "floor": gym_floor,
        },
        SINGLE,
    ),
    _workload(
        f"Collector(GymEnv('{ENV_ID}'), frames_per_batch={SINGLE}) with a trivial policy",
        {
            "rl_stack": gym_collector_policy,
            "torchrl": gym_collector_policy,
            "floor": gym_policy_floor_setup,
            "gymnasium": raw_gymnasium_loop,
        },
        SINGLE,
    ),
    _workload(
        f"Collector(MultiThreadedEnv(32, '{ENV_ID}'), frames_per_batch={32 * STEPS})"
        " with a trivial policy",
        {
            "rl_stack": envpool_collector_policy,
            "torchrl": envpool_collector_policy,
            "floor": envpool_policy_bound_setup,
            "envpool": raw_envpool_loop,
        },
        32 * STEPS,
    ),
    _workload(
        f"Collector(MultiThreadedEnv(32, '{ENV_ID}'), frames_per_batch={32 * STEPS})",
        {
            "rl_stack": envpool_collector,
            "torchrl": envpool_collector,
            "floor": envpool_floor,
            "envpool": raw_envpool_loop,
        },
        32 * STEPS,
    ),
    _workload(
        f"Collector(ParallelEnv(8, GymEnv('{ENV_ID}')), frames_per_batch={8 * STEPS})"
        " (gymnasium: SyncVectorEnv(8))",
        {
            "rl_stack": parallel_collector,
            "torchrl": parallel_collector,
            "floor": parallel_floor,
            "gymnasium": raw_sync_vector_loop,
        },
        8 * STEPS,
    ),
    _workload(
        f"Collector(SerialEnv(8, GymEnv('{ENV_ID}')), frames_per_batch={8 * STEPS})",
        {"rl_stack": serial_collector, "torchrl": serial_collector, "floor": parallel_floor},
        8 * STEPS,
    ),
    _workload(
        f"MultiSyncCollector(2 x SerialEnv(4, GymEnv('{ENV_ID}')), frames_per_batch={8 * STEPS})",
        {
            "rl_stack": multi_sync_collector,
            "torchrl": multi_sync_collector,
            "floor": two_process_floor,
        },
        8 * STEPS,
    ),
    _workload(
        f"MultiAsyncCollector(2 x SerialEnv(4, GymEnv('{ENV_ID}')), frames_per_batch={4 * STEPS})",
        {
            "rl_stack": multi_async_collector,
            "torchrl": multi_async_collector,
            "floor": two_process_async_floor,
        },
        4 * STEPS,
    ),
]


def interleaved(rounds: int = 7) -> None:
    """Time every library this interpreter can run in alternation, one workload at a time.

    On a shared machine the load changes between two sequential runs; alternating the
    libraries call by call gives ratios that hold within the run. Run it in the
    project's venv (``rl_stack``, ``floor``, raw gymnasium and EnvPool) and in the peer
    venv (``torchrl``, ``floor``, raw loops): the floor, timed in both, relates the
    two runs (``ours/torchrl = (ours/floor) / (torchrl/floor)``).
    """
    import statistics
    import time

    import torch

    from _harness import _library

    torch.set_num_threads(1)
    _KEEP.append(True)
    for workload in WORKLOADS:
        fns = {}
        for lib, setup in workload.setups.items():
            try:
                fns[lib] = setup(Context(name=lib, device="cpu", lib=_library(lib)))
                fns[lib]()  # warm-up
            except Exception as err:  # a library this interpreter does not have
                print(f"{lib:>10}: n/a ({type(err).__name__})")
        times: dict[str, list[float]] = {lib: [] for lib in fns}
        for _ in range(rounds):
            for lib, fn in fns.items():
                start = time.perf_counter()
                fn()
                times[lib].append(time.perf_counter() - start)
        rates = {lib: workload.items / statistics.median(t) for lib, t in times.items()}
        print(f"### {workload.name}")
        for lib, rate in rates.items():
            ratios = "".join(
                f"  {lib}/{other} = {rate / rates[other]:.2f}x"
                for other in ("floor", "gymnasium", "envpool")
                if other in rates and other != lib
            )
            print(f"{lib:>10}: {rate:>10,.0f} {workload.unit}/s{ratios}")
        _KEEP.clear()
        _track()
        _KEEP.append(True)
    _KEEP.clear()
    _track()
    if "rl_stack" in sys.modules or _has("rl_stack"):
        importlib.import_module("two_workers").compare(rounds)


def _has(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


if __name__ == "__main__":
    if "--interleaved" in sys.argv:
        interleaved()
    else:
        run(WORKLOADS)
        _track()
