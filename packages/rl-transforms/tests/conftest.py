"""Small environments for the transform tests (built on rl_envs_core.EnvBase)."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict, TensorDictBase

from rl_envs_core import EnvBase
from rl_envs_core.testing import CountingEnv
from rl_specs import Bounded, Categorical, Composite, OneHot, Unbounded


class ContinuousEnv(EnvBase):
    """float64 observation ``[3]``, float64 bounded action ``[2]``; obs += sum(action).

    Done after ``max_steps`` steps. Records the last action received in ``last_action``.
    """

    def __init__(self, max_steps: int = 5, *, batch_size=(), dtype=torch.float64, pixels=False):
        super().__init__(batch_size=batch_size)
        shape = tuple(self.batch_size)
        obs = {"observation": Unbounded(shape=(*shape, 3), dtype=dtype)}
        if pixels:
            obs["pixels"] = Bounded(0, 255, shape=(*shape, 8, 8, 3), dtype=torch.uint8)
        self.observation_spec = Composite(obs, shape=self.batch_size)
        self.action_spec = Bounded(-1.0, 1.0, shape=(*shape, 2), dtype=dtype)
        self.reward_spec = Unbounded(shape=(*shape, 1))
        self.add_truncated_keys()
        self.max_steps = max_steps
        self.dtype = dtype
        self.pixels = pixels
        self.count = torch.zeros((*shape, 1), dtype=torch.int64)
        self.last_action = None

    def _out(self) -> TensorDictBase:
        shape = self.batch_size
        done = self.count >= self.max_steps
        out = {
            "observation": self.count.to(self.dtype).expand(*shape, 3).clone(),
            "done": done,
            "terminated": done.clone(),
            "truncated": torch.zeros_like(done),
        }
        if self.pixels:
            out["pixels"] = (
                torch.arange(8 * 8 * 3, dtype=torch.uint8)
                .reshape(8, 8, 3)
                .expand(*shape, 8, 8, 3)
                .clone()
            )
        return TensorDict(out, batch_size=shape)

    def _reset(self, tensordict=None, **kwargs):
        reset = tensordict.get("_reset", None) if tensordict is not None else None
        if reset is None:
            self.count = torch.zeros_like(self.count)
        else:
            self.count = torch.where(reset.reshape(self.count.shape), 0, self.count)
        return self._out()

    def _step(self, tensordict):
        self.last_action = tensordict.get("action")
        self.count = self.count + 1
        out = self._out()
        out.set("reward", torch.ones(*self.batch_size, 1))
        return out

    def _set_seed(self, seed):
        return None


@pytest.fixture
def counting_env():
    return CountingEnv


@pytest.fixture
def continuous_env():
    return ContinuousEnv


class MaskedEnv(EnvBase):
    """One-hot action over 4 choices, an ``action_mask`` allowing one action per step.

    The allowed action is ``count % n`` (``cycle=True``), else always actions 1 and 2;
    ``last_action`` records the index received.
    """

    def __init__(self, *, batch_size=(), n=4, cycle=True):
        super().__init__(batch_size=batch_size)
        shape = tuple(self.batch_size)
        self.n = n
        self.observation_spec = Composite(
            observation=Unbounded(shape=(*shape, 1)),
            action_mask=Categorical(2, shape=(*shape, n), dtype=torch.bool),
            shape=self.batch_size,
        )
        self.action_spec = OneHot(n, shape=(*shape, n))
        self.reward_spec = Unbounded(shape=(*shape, 1))
        self.add_truncated_keys()
        self.count = 0
        self.cycle = cycle
        self.last_action = None

    def _out(self):
        shape = self.batch_size
        mask = torch.zeros(*shape, self.n, dtype=torch.bool)
        if self.cycle:
            mask[..., self.count % self.n] = True
        else:
            mask[..., 1:3] = True
        done = torch.zeros(*shape, 1, dtype=torch.bool)
        return TensorDict(
            {
                "observation": torch.full((*shape, 1), float(self.count)),
                "action_mask": mask,
                "done": done,
                "terminated": done.clone(),
                "truncated": done.clone(),
            },
            batch_size=shape,
        )

    def _reset(self, tensordict=None, **kwargs):
        self.count = 0
        return self._out()

    def _step(self, tensordict):
        self.last_action = tensordict.get("action").float().argmax(-1)
        self.count += 1
        out = self._out()
        out.set("reward", torch.ones(*self.batch_size, 1))
        return out

    def _set_seed(self, seed):
        return None


class SelfResettingEnv(EnvBase):
    """Counts steps; at ``max_steps`` it returns done with the *next* episode's first obs (0)."""

    def __init__(self, max_steps: int = 3, *, lives: bool = False, **kwargs):
        super().__init__(**kwargs)
        obs = {"observation": Unbounded(shape=(1,))}
        if lives:
            obs["lives"] = Unbounded(shape=(1,), dtype=torch.int64)
        self.observation_spec = Composite(obs)
        self.action_spec = Categorical(2, shape=(1,))
        self.reward_spec = Unbounded(shape=(1,))
        self.add_truncated_keys()
        self.max_steps = max_steps
        self.with_lives = lives
        self.count = 0
        self.resets = 0

    def _out(self, done: bool):
        flag = torch.tensor([done])
        out = {
            "observation": torch.tensor([float(self.count)]),
            "done": flag,
            "terminated": flag.clone(),
            "truncated": torch.tensor([False]),
        }
        if self.with_lives:
            out["lives"] = torch.tensor([3 - self.count // 2])
        return TensorDict(out)

    def _reset(self, tensordict=None, **kwargs):
        self.resets += 1
        self.count = 0
        return self._out(False)

    def _step(self, tensordict):
        self.count += 1
        done = self.count >= self.max_steps
        if done:
            self.count = 0
        out = self._out(done)
        out.set("reward", torch.ones(1))
        return out

    def _set_seed(self, seed):
        return None


@pytest.fixture
def masked_env():
    return MaskedEnv


@pytest.fixture
def self_resetting_env():
    return SelfResettingEnv


class MarlEnv(EnvBase):
    """Two agents under ``"agents"``: per-agent observation, reward and done; a root done too."""

    def __init__(self, max_steps: int = 3):
        super().__init__()
        agents = Composite(
            observation=Unbounded(shape=(2, 1)),
            shape=(2,),
        )
        self.observation_spec = Composite(agents=agents)
        self.action_spec = Composite(
            agents=Composite(action=Categorical(2, shape=(2, 1)), shape=(2,))
        )
        self.reward_spec = Composite(agents=Composite(reward=Unbounded(shape=(2, 1)), shape=(2,)))
        flag = Categorical(2, shape=(2, 1), dtype=torch.bool)
        self.done_spec = Composite(
            done=Categorical(2, shape=(1,), dtype=torch.bool),
            terminated=Categorical(2, shape=(1,), dtype=torch.bool),
            agents=Composite(done=flag.clone(), terminated=flag.clone(), shape=(2,)),
        )
        self.max_steps = max_steps
        self.count = 0

    def _out(self):
        done = self.count >= self.max_steps
        agents_done = torch.full((2, 1), done)
        return TensorDict(
            {
                "agents": TensorDict(
                    {
                        "observation": torch.full((2, 1), float(self.count)),
                        "done": agents_done,
                        "terminated": agents_done.clone(),
                    },
                    [2],
                ),
                "done": torch.tensor([done]),
                "terminated": torch.tensor([done]),
            }
        )

    def _reset(self, tensordict=None, **kwargs):
        self.count = 0
        return self._out()

    def _step(self, tensordict):
        self.count += 1
        out = self._out()
        out.set(("agents", "reward"), torch.tensor([[1.0], [2.0]]))
        return out

    def _set_seed(self, seed):
        return None


@pytest.fixture
def marl_env():
    return MarlEnv
