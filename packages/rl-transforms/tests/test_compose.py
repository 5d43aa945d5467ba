"""Compose chains: what appending a Compose does."""

from __future__ import annotations

from rl_envs_core.testing import CountingEnv
from rl_transforms import Compose, RewardScaling, StepCounter, TransformedEnv


def test_appending_a_compose_appends_its_transforms():
    env = TransformedEnv(CountingEnv(), StepCounter())
    extra = Compose(RewardScaling(0.0, 2.0), StepCounter(step_count_key="other"))
    env.append_transform(extra)
    names = [type(t).__name__ for t in env.transform]
    assert names == ["StepCounter", "RewardScaling", "StepCounter"]
    assert all(t.parent is not None for t in env.transform)  # each knows the env before it
    assert len(extra) == 0  # the transforms moved; they belong to one chain
    data = env.rollout(3)
    assert data["next", "reward"].flatten().tolist() == [2.0, 2.0, 2.0]
    assert data["next", "other"].flatten().tolist() == [1, 2, 3]


def test_a_compose_subclass_is_appended_whole():
    class Pipeline(Compose):
        pass

    env = TransformedEnv(CountingEnv(), StepCounter())
    env.append_transform(Pipeline(RewardScaling(0.0, 2.0)))
    assert [type(t).__name__ for t in env.transform] == ["StepCounter", "Pipeline"]
