"""Auto-resetting envs: EnvBase(auto_reset=True, auto_reset_replace=...) and the handler hook."""

from __future__ import annotations

import math

import pytest
import torch
from tensordict import TensorDict

from rl_envs_core.extension import (
    AutoResetHandler,
    CarryOverAutoReset,
)
from rl_envs_core.testing import CountingEnv

NAN = math.nan


class AutoResettingCountingEnv(CountingEnv):
    """Resets itself inside ``_step`` when done, like the documented gym example."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.reset_calls = 0

    def _step(self, tensordict):
        out = super()._step(tensordict)
        if out["done"].any():
            reset = super()._reset(TensorDict({"_reset": out["done"]}, self.batch_size))
            out.update(reset.exclude(*self.done_keys))
        return out

    def _reset(self, tensordict=None, **kwargs):
        self.reset_calls += 1
        if tensordict is not None and "_reset" in tensordict.keys():
            return tensordict.copy()
        return super()._reset(tensordict)


def _as_list(t):
    return [NAN if math.isnan(x) else x for x in t.flatten().tolist()]


def _same(a, b):
    return len(a) == len(b) and all(
        (math.isnan(x) and math.isnan(y)) or x == y for x, y in zip(a, b)
    )


class TestCarryOverAutoReset:
    def test_observations_after_done_are_nan_and_carried_over(self):
        env = AutoResettingCountingEnv(max_steps=3, auto_reset=True, auto_reset_replace=True)
        data = env.rollout(7, break_when_any_done=False)
        assert data["next", "done"].squeeze(-1).tolist() == [
            False, False, True, False, False, True, False
        ]
        assert _same(_as_list(data["next", "observation"]), [1, 2, NAN, 1, 2, NAN, 1])
        assert data["observation"].squeeze(-1).tolist() == [0, 1, 2, 0, 1, 2, 0]
        assert env.reset_calls == 1

    def test_replace_false_keeps_the_delivered_observation(self):
        env = AutoResettingCountingEnv(max_steps=2, auto_reset=True, auto_reset_replace=False)
        data = env.rollout(4, break_when_any_done=False)
        assert data["next", "observation"].squeeze(-1).tolist() == [1, 0, 1, 0]
        assert data["observation"].squeeze(-1).tolist() == [0, 1, 0, 1]

    def test_batched_auto_reset_touches_only_done_elements(self):
        env = AutoResettingCountingEnv(max_steps=2, batch_size=[2], auto_reset=True)
        env.reset()
        env.count = torch.tensor([[1.0], [0.0]])
        start = TensorDict({"observation": env.count.float()}, [2]).update(
            env.full_done_spec.zero()
        )
        data = env.rollout(2, auto_reset=False, tensordict=start, break_when_any_done=False)
        assert _same(_as_list(data["next", "observation"]), [NAN, 1, 1, NAN])
        assert data["observation"].squeeze(-1).tolist() == [[1, 0], [0, 1]]

    @pytest.mark.parametrize(
        "value,expected", [(torch.tensor([[3]]), -1), (torch.tensor([[True]]), False)]
    )
    def test_placeholders_for_non_float_entries(self, value, expected):
        env = CountingEnv()
        handler = CarryOverAutoReset(replace=True)
        nxt = TensorDict({"obs": value, "done": torch.tensor([[True]])}, [1])
        env.full_done_spec = env.full_done_spec.select("done").expand(*env.batch_size)
        out = handler.on_step(env, nxt)
        assert out["obs"].item() == expected

    def test_full_reset_calls_reset(self):
        env = AutoResettingCountingEnv(auto_reset=True)
        env.reset()
        env.reset()
        assert env.reset_calls == 2

    def test_auto_reset_handler_property(self):
        assert isinstance(CountingEnv(auto_reset=True).auto_reset_handler, AutoResetHandler)
        assert CountingEnv().auto_reset_handler is None
