"""``GymEnv(..., num_workers=n)``: a ParallelEnv of gym envs built in the workers."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("gymnasium")

from rl_batched_envs import ParallelEnv  # registers the ParallelEnv factory
from rl_env_adapters import GymEnv


def test_several_workers_give_a_parallel_env_of_gym_envs():
    env = GymEnv("CartPole-v1", num_workers=2, categorical_action_encoding=True)
    try:
        assert isinstance(env, ParallelEnv) and env.batch_size == torch.Size([2])
        assert not env.is_closed
        assert env._use_buffers is False  # the workers report the metadata
        assert all(not isinstance(fn, type) or fn is GymEnv for fn in env.create_env_fn)
        assert env.set_seed(0) is not None
        data = env.rollout(3, break_when_any_done=False)
        assert data["action"].shape == torch.Size([2, 3])  # categorical, as asked
        with pytest.raises(RuntimeError, match="after the environment has started"):
            env.configure_parallel(num_threads=1)
    finally:
        env.close()


def test_one_worker_or_native_vectorisation_stay_in_process():
    assert type(GymEnv("CartPole-v1", num_workers=1)) is GymEnv
    vec = GymEnv("CartPole-v1", num_envs=2, vectorization_mode="sync")
    assert type(vec) is GymEnv and vec.batch_size == torch.Size([2])


@pytest.mark.parametrize("bad", [0, -1, 2.0, True])
def test_bad_worker_counts_raise(bad):
    with pytest.raises(ValueError, match="num_workers"):
        GymEnv("CartPole-v1", num_workers=bad)
