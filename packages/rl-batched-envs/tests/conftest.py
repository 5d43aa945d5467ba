"""Small test envs (as fixtures) and the no-stray-process guard of this suite."""

from __future__ import annotations

import multiprocessing
import os
import time

import pytest
import torch
from tensordict import TensorDict, TensorDictBase

from rl_envs_core import EnvBase
from rl_envs_core.testing import CountingEnv
from rl_specs import Categorical, Composite, Unbounded


def _done_spec(shape: tuple) -> dict:
    return {
        name: Categorical(2, shape=(*shape, 1), dtype=torch.bool)
        for name in ("done", "terminated", "truncated")
    }


class TwoLevelEnv(EnvBase):
    """Root counter plus two agents' counters with their own done level (``"agents"``).

    Agents are done after ``max_steps`` steps, the root after ``2 * max_steps``.
    """

    def __init__(self, max_steps: int = 2, batch_size: tuple = ()) -> None:
        super().__init__(batch_size=batch_size)
        bs = tuple(self.batch_size)
        self.max_steps = max_steps
        self.observation_spec = Composite(
            observation=Unbounded(shape=(*bs, 1)),
            agents=Composite(obs=Unbounded(shape=(*bs, 2, 1)), shape=(*bs, 2)),
            shape=bs,
        )
        self.action_spec = Categorical(2, shape=(*bs, 1))
        self.reward_spec = Unbounded(shape=(*bs, 1))
        self.full_done_spec = Composite(
            **_done_spec(bs), agents=Composite(**_done_spec((*bs, 2)), shape=(*bs, 2)), shape=bs
        )
        self.count = torch.zeros(*bs, 1)
        self.agents = torch.zeros(*bs, 2, 1)

    def _out(self) -> TensorDictBase:
        bs = self.batch_size
        done = self.count >= 2 * self.max_steps
        adone = self.agents >= self.max_steps
        return TensorDict(
            {
                "observation": self.count.clone(),
                "done": done,
                "terminated": done.clone(),
                "truncated": torch.zeros_like(done),
                "agents": TensorDict(
                    {
                        "obs": self.agents.clone(),
                        "done": adone,
                        "terminated": adone.clone(),
                        "truncated": torch.zeros_like(adone),
                    },
                    batch_size=(*bs, 2),
                ),
            },
            batch_size=bs,
        )

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: object) -> TensorDictBase:
        root = tensordict.get("_reset", None) if tensordict is not None else None
        nested = tensordict.get(("agents", "_reset"), None) if tensordict is not None else None
        if root is None and nested is None:
            self.count.zero_()
            self.agents.zero_()
        elif root is not None:
            self.count = torch.where(root.reshape(self.count.shape), 0.0, self.count)
            self.agents = torch.where(root.reshape(*self.count.shape[:-1], 1, 1), 0.0, self.agents)
        else:
            self.agents = torch.where(nested.reshape(self.agents.shape), 0.0, self.agents)
        return self._out()

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self.count += 1
        self.agents += 1
        out = self._out()
        out.set("reward", torch.ones_like(self.count))
        return out

    def _set_seed(self, seed: int | None) -> None:
        self.seed = seed


class SeededCountingEnv(CountingEnv):
    """A counting env whose first observation after reset is a seeded random int."""

    def _set_seed(self, seed: int | None) -> None:
        self.rng = torch.Generator().manual_seed(0 if seed is None else seed)

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: object) -> TensorDictBase:
        out = super()._reset(tensordict)
        rng = getattr(self, "rng", None) or torch.Generator().manual_seed(123)
        self.count = torch.randint(0, 1000, self.count.shape, generator=rng)
        out.set("observation", self.count.float())
        return out

    def ping(self, x: int) -> int:
        return x + 1


@pytest.fixture
def two_level_env():
    return TwoLevelEnv


@pytest.fixture
def seeded_env():
    return SeededCountingEnv


def _shm_entries() -> set[str]:
    try:
        return set(os.listdir("/dev/shm"))
    except OSError:
        return set()


@pytest.fixture(autouse=True)
def no_stray_processes():
    """Every test must leave no child process and no new shared-memory segment."""
    before = _shm_entries()
    yield
    deadline = time.monotonic() + 3.0
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert multiprocessing.active_children() == []
    ours = {name for name in _shm_entries() - before if f"_{os.getpid()}_" in name}
    assert ours == set()
