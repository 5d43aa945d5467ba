"""Pipelines across distributions, as a training loop uses them: envs -> buffers -> disk."""

from __future__ import annotations

from functools import partial

import pytest
import torch
from torch import multiprocessing as mp

from rl_envs_core.testing import CountingEnv
from rl_stack.data import (
    LazyMemmapStorage,
    LazyTensorStorage,
    ReplayBuffer,
    SamplerWithoutReplacement,
    SliceSampler,
    TensorDictReplayBuffer,
)
from rl_stack.envs import (
    Compose,
    DoubleToFloat,
    GymEnv,
    MultiThreadedEnv,
    ParallelEnv,
    RewardScaling,
    RewardSum,
    StepCounter,
    TransformedEnv,
)

SLICE_LEN = 8


def test_gym_transforms_parallel_env_into_ndim2_buffer_gives_contiguous_slices():
    pytest.importorskip("gymnasium")
    env = TransformedEnv(
        ParallelEnv(2, partial(GymEnv, "CartPole-v1")),
        Compose(StepCounter(), RewardSum(), DoubleToFloat()),
    )
    try:
        env.set_seed(0)
        data = env.rollout(100, break_when_any_done=False)
    finally:
        env.close()
    rb = TensorDictReplayBuffer(
        storage=LazyMemmapStorage(200, ndim=2),
        sampler=SliceSampler(slice_len=SLICE_LEN, end_key=("next", "done")),
        batch_size=64,
    )
    rb.extend(data)
    assert len(rb) == 200
    torch.manual_seed(0)
    slices = rb.sample().reshape(-1, SLICE_LEN)
    counts = slices["step_count"].squeeze(-1)
    assert (counts[:, 1:] == counts[:, :-1] + 1).all()  # step counts increase within a slice
    # each step starts where the previous one ended: one trajectory, no episode boundary
    assert torch.equal(slices["observation"][:, 1:], slices["next", "observation"][:, :-1])
    assert not slices["next", "done"][:, :-1].any()


def test_envpool_data_survives_dumps_and_loads_with_identical_samples(tmp_path):
    pytest.importorskip("envpool")
    env = MultiThreadedEnv(4, "CartPole-v1")
    try:
        env.set_seed(0)
        data = env.rollout(50, break_when_any_done=False)
    finally:
        env.close()

    def buffer():
        return TensorDictReplayBuffer(
            storage=LazyMemmapStorage(200, ndim=2),
            sampler=SliceSampler(slice_len=SLICE_LEN, end_key=("next", "done")),
            batch_size=32,
        )

    rb = buffer()
    rb.extend(data)
    rb.dumps(tmp_path)
    restored = buffer()
    restored.loads(tmp_path)
    assert len(restored) == len(rb) == 200
    torch.manual_seed(1)
    expected = rb.sample()
    torch.manual_seed(1)
    got = restored.sample()
    assert set(got.keys(True, True)) == set(expected.keys(True, True))
    for key in expected.keys(True, True):
        assert torch.equal(got[key], expected[key]), key


def test_one_transform_on_an_env_and_on_a_replay_buffer_gives_the_same_data():
    env = TransformedEnv(CountingEnv(max_steps=100), RewardScaling(loc=1.0, scale=10.0))
    transformed = env.rollout(20)
    raw = env.base_env.rollout(20)

    rb = ReplayBuffer(
        storage=LazyTensorStorage(20),
        sampler=SamplerWithoutReplacement(shuffle=False),
        batch_size=20,
    )
    # stored TED data keeps the reward under "next": the buffer's copy says so
    rb.append_transform(RewardScaling(loc=1.0, scale=10.0, in_keys=[("next", "reward")]))
    rb.extend(raw)
    sampled = rb.sample()
    assert torch.equal(sampled["next", "reward"], transformed["next", "reward"])
    assert torch.equal(raw["next", "reward"], rb.storage[:]["next", "reward"])  # stored raw


def _collect_into(rb: TensorDictReplayBuffer, start: float) -> None:
    env = ParallelEnv(2, partial(CountingEnv, max_steps=100))
    try:
        data = env.rollout(5)
        data["observation"] += start  # tag the data with its collector
        rb.extend(data.reshape(-1))
    finally:
        env.close()


def test_two_processes_with_parallel_envs_extend_one_shared_buffer(tmp_path):
    rb = TensorDictReplayBuffer(storage=LazyMemmapStorage(40, scratch_dir=tmp_path))
    _collect_into(rb, 0.0)  # as in the seed, the parent writes first: the storage exists
    ctx = mp.get_context("fork")
    workers = [ctx.Process(target=_collect_into, args=(rb, 1000.0 * i)) for i in (1, 2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
        assert worker.exitcode == 0
    assert len(rb) == 30  # 3 collectors x 2 envs x 5 steps
    tags = (rb[:]["observation"] // 1000).squeeze(-1)
    assert sorted(tags.tolist()) == [0.0] * 10 + [1.0] * 10 + [2.0] * 10
