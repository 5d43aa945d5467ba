"""The floors of the gym collector workloads of ``bench_collectors.py``: no framework.

A floor is the least work the documented output of a batch needs: one batch of
random actions drawn at once, the simulator's steps (and the resets of finished
envs) written into preallocated numpy arrays, the root observation of each step
taken from the previous step's, trajectory ids from the done flags, and one
``TensorDict`` over those arrays (the one-hot action and the ``[env, time]`` layout
included).

:class:`ProcessFloor` is the floor of the multi-process collectors: the same loop
in worker processes (forked once), each writing into its slice of arrays mapped
into every process; per batch the parent writes one byte to each worker's pipe,
blocks until they answer, and copies the batch out of the shared arrays (the next
batch overwrites them). Nothing else: no framework, no per-step message.
"""

from __future__ import annotations

import mmap
import multiprocessing as mp
from multiprocessing import connection

import gymnasium
import numpy as np
import torch
from tensordict import TensorDict

ENV_ID = "CartPole-v1"


def ted(obs, next_obs, action, reward, terminated, truncated, ids, batch):
    """The documented batch over preallocated arrays: one TensorDict, no copy."""

    def t(array):
        return torch.from_numpy(array) if isinstance(array, np.ndarray) else array

    done = terminated | truncated
    flags = {"done": t(done), "terminated": t(terminated), "truncated": t(truncated)}
    root_done = torch.zeros_like(flags["done"])
    return TensorDict(
        {
            "observation": t(obs),
            "action": torch.nn.functional.one_hot(t(action), 2).bool(),
            "done": root_done,
            "terminated": root_done.clone(),
            "truncated": root_done.clone(),
            "collector": {"traj_ids": t(ids)},
            "next": {"observation": t(next_obs), "reward": t(reward), **flags},
        },
        batch_size=batch,
    )


def gym_rows(step, reset, actions, obs, next_obs, reward, terminated, truncated):
    """One gym env through ``len(actions)`` steps, written into row views; its resets."""
    resets = []
    for i, a in enumerate(actions):
        o, r, te, tr, _ = step(a)
        next_obs[i] = o
        reward[i, 0], terminated[i, 0], truncated[i, 0] = r, te, tr
        if te or tr:
            o, _ = reset()
            resets.append(i)
        obs[i + 1] = o
    return resets


def ids_from_done(done, first_ids, next_id):
    """``[n, T]`` trajectory ids from the done flags: new ids in (step, env) order."""
    n, steps = done.shape
    ends = done.T.reshape(-1)
    new = next_id + torch.cumsum(ends, 0) - 1
    table = torch.cat([first_ids.unsqueeze(0), new.reshape(steps, n)])
    starts = torch.cat([torch.ones(1, n, dtype=torch.bool), done.T])
    rows = torch.where(starts, torch.arange(steps + 1).unsqueeze(-1), 0).cummax(0).values
    filled = table.gather(0, rows)
    return filled[:steps].T, filled[steps], next_id + int(ends.sum())


def _arrays(n: int, steps: int, lead: tuple[int, ...] = (), buffer=None) -> dict:
    """The arrays of ``n`` envs x ``steps`` steps (over ``buffer`` when given)."""
    layout = {
        "obs": ((n, steps + 1, 4), np.float32),
        "next_obs": ((n, steps, 4), np.float32),
        "reward": ((n, steps, 1), np.float32),
        "terminated": ((n, steps, 1), np.bool_),
        "truncated": ((n, steps, 1), np.bool_),
        "action": ((n, steps), np.int64),
        "ids": ((n, steps), np.int64),
    }
    out, offset = {}, 0
    for name, (shape, dtype) in layout.items():
        shape = (*lead, *shape)
        size = int(np.prod(shape)) * np.dtype(dtype).itemsize
        if buffer is None:
            out[name] = np.empty(shape, dtype)
        else:
            out[name] = np.frombuffer(buffer, dtype, int(np.prod(shape)), offset).reshape(shape)
        offset += -(-size // 8) * 8
    out["nbytes"] = offset
    return out


class GymArrays:
    """``n`` gym CartPoles collecting ``steps`` steps each into given arrays.

    Trajectory ids are ``local * stride + offset`` (workers never collide).
    """

    def __init__(self, n: int, steps: int, seed: int = 0, offset: int = 0, stride: int = 1):
        self.envs = [gymnasium.make(ENV_ID) for _ in range(n)]
        self.obs = np.stack([env.reset(seed=seed + i)[0] for i, env in enumerate(self.envs)])
        self.n, self.steps, self.offset, self.stride = n, steps, offset, stride
        self.ids, self.next_id = torch.arange(n), n

    def collect(self, a: dict) -> None:
        n, steps = self.n, self.steps
        action = torch.randint(0, 2, (n, steps))
        a["action"][...] = action.numpy()
        actions = action.tolist()
        obs, next_obs, reward = a["obs"], a["next_obs"], a["reward"]
        terminated, truncated = a["terminated"], a["truncated"]
        obs[:, 0] = self.obs
        for e, env in enumerate(self.envs):
            rows = (obs[e], next_obs[e], reward[e], terminated[e], truncated[e])
            gym_rows(env.step, env.reset, actions[e], *rows)
        self.obs = obs[:, steps].copy()
        done = torch.from_numpy(terminated | truncated).squeeze(-1)
        ids, self.ids, self.next_id = ids_from_done(done, self.ids, self.next_id)
        a["ids"][...] = (ids * self.stride + self.offset).numpy()


def gym_batch_floor(n: int, steps: int):
    """``n`` gym CartPoles (one process) collecting ``steps`` steps each into arrays."""
    envs = GymArrays(n, steps)

    def loop():
        a = _arrays(n, steps)
        envs.collect(a)
        batch = [n, steps] if n > 1 else [steps]
        pick = (lambda x: x[0]) if n == 1 else (lambda x: x)
        names = ("obs", "next_obs", "action", "reward", "terminated", "truncated", "ids")
        values = [pick(a[k][:, :steps] if k == "obs" else a[k]) for k in names]
        return ted(*values, batch)

    return loop


def gym_policy_floor(steps: int, policy):
    """One gym CartPole whose actions come from ``policy`` (one call per step, on the root).

    The least work of a collector batch with a policy: the policy called on each
    step's root observation (a tensor view of its preallocated row), its one-hot
    action kept, gym stepped with its index and its outputs written into rows; one
    ``TensorDict`` at the end.
    """
    env = gymnasium.make(ENV_ID)
    state = {"obs": env.reset(seed=0)[0], "ids": torch.arange(1), "next_id": 1}

    def loop():
        a = _arrays(1, steps)
        obs, next_obs, reward = a["obs"][0], a["next_obs"][0], a["reward"][0]
        terminated, truncated = a["terminated"][0], a["truncated"][0]
        roots, actions = torch.from_numpy(obs), torch.empty(steps, dtype=torch.int64)
        obs[0] = state["obs"]
        for i in range(steps):
            index = int(policy(roots[i]).view(torch.uint8).argmax())  # its one-hot bool action
            actions[i] = index
            o, r, te, tr, _ = env.step(index)
            next_obs[i], reward[i, 0], terminated[i, 0], truncated[i, 0] = o, r, te, tr
            if te or tr:
                o, _ = env.reset()
            obs[i + 1] = o
        state["obs"] = obs[steps].copy()
        done = torch.from_numpy(terminated | truncated)[:, 0].unsqueeze(0)
        ids, state["ids"], state["next_id"] = ids_from_done(done, state["ids"], state["next_id"])
        return ted(obs[:steps], next_obs, actions, reward, terminated, truncated, ids[0], [steps])

    return loop


def envpool_policy_bound(n: int, steps: int, policy):
    """A lower bound for ``n`` EnvPool CartPoles driven by ``policy``: EnvPool's own loop.

    Each call runs the policy on the current observations of the envs it steps
    and steps them (EnvPool's C++ send / recv, its auto-reset: a call after an
    episode end resets that env and makes no transition), until every env made
    ``steps`` transitions; nothing is recorded. Any collector does this work and
    more (it also writes every step into the batch).
    """
    import envpool

    pool = envpool.make(ENV_ID, env_type="gymnasium", num_envs=n, seed=0)
    first, _ = pool.reset()
    keys = pool._state_keys
    at_obs, at_done = keys.index("obs"), keys.index("done")
    send, recv = pool._send, pool._recv
    state = {"obs": torch.from_numpy(first)}

    def loop():
        made, pending = np.zeros(n, np.int64), np.zeros(n, bool)
        ids, obs = np.arange(n, dtype=np.int32), state["obs"]
        while len(ids):
            action = policy(obs).numpy().astype(np.int32)  # its index actions
            send([ids, ids, action])
            out = recv()
            made[ids] += ~pending[ids]
            pending[ids] = out[at_done]
            every = torch.from_numpy(out[at_obs])
            short = made[ids] < steps
            ids, obs = ids[short], every[torch.from_numpy(short)]
        state["obs"] = torch.from_numpy(pool.reset()[0])  # every env from a fresh start

    return loop


def _serve(conn, n: int, steps: int, worker: int, workers: int, buffer) -> None:
    """A floor worker: collect into its slice of the shared arrays at each byte."""
    torch.set_num_threads(1)
    arrays = _arrays(n, steps, (workers,), buffer)
    mine = {k: v[worker] for k, v in arrays.items() if k != "nbytes"}
    envs = GymArrays(n, steps, seed=worker * n, offset=worker, stride=workers)
    while conn.recv_bytes() == b"n":
        envs.collect(mine)
        conn.send_bytes(b"k")


class ProcessFloor:
    """``workers`` processes of ``n`` gym CartPoles each; batches through shared arrays.

    ``sync()``: every worker collects one batch, the parent returns the
    ``[workers, n, steps]`` batch. ``next_async()``: each worker keeps one batch
    in flight; the parent returns whichever worker's ``[n, steps]`` batch is ready.
    """

    def __init__(self, workers: int, n: int, steps: int) -> None:
        self.n, self.steps, self.workers = n, steps, workers
        nbytes = _arrays(n, steps, (workers,))["nbytes"]
        self.buffer = mmap.mmap(-1, nbytes)  # anonymous, shared with the forked workers
        self.arrays = _arrays(n, steps, (workers,), self.buffer)
        ctx = mp.get_context("fork")
        self.conns, self.procs = [], []
        for w in range(workers):
            parent, child = ctx.Pipe()
            proc = ctx.Process(
                target=_serve, args=(child, n, steps, w, workers, self.buffer), daemon=True
            )
            proc.start()
            child.close()
            self.conns.append(parent)
            self.procs.append(proc)
        self.in_flight: set[int] = set()
        self.ready: list[int] = []

    def _batch(self, index) -> TensorDict:
        a, steps = self.arrays, self.steps
        lead = [self.workers] if isinstance(index, slice) else []
        return ted(
            a["obs"][index, :, :steps],
            a["next_obs"][index],
            a["action"][index],
            a["reward"][index],
            a["terminated"][index],
            a["truncated"][index],
            a["ids"][index],
            [*lead, self.n, steps],
        ).clone()

    def sync(self) -> TensorDict:
        for conn in self.conns:
            conn.send_bytes(b"n")
        for conn in self.conns:
            conn.recv_bytes()
        return self._batch(slice(None))

    def next_async(self) -> TensorDict:
        for w, conn in enumerate(self.conns):
            if w not in self.in_flight and w not in self.ready:
                conn.send_bytes(b"n")
                self.in_flight.add(w)
        if not self.ready:
            for conn in connection.wait([self.conns[w] for w in sorted(self.in_flight)]):
                w = self.conns.index(conn)
                conn.recv_bytes()
                self.in_flight.discard(w)
                self.ready.append(w)
        w = self.ready.pop(0)
        batch = self._batch(w)
        self.conns[w].send_bytes(b"n")
        self.in_flight.add(w)
        return batch

    def close(self) -> None:
        for conn in self.conns:
            try:
                conn.send_bytes(b"c")
            except OSError:
                pass
        for proc in self.procs:
            proc.join(5)
            if proc.is_alive():
                proc.kill()
        for conn in self.conns:
            conn.close()
        self.conns, self.procs = [], []
