"""StepScalars: reward and done flags of unbatched steps, cut from preallocated blocks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rl_env_adapters._step_scalars import StepScalars


def test_values_dtypes_and_shapes():
    reward, terminated, truncated, done = StepScalars()(2.5, True, False)
    assert reward.dtype is torch.float32 and reward.tolist() == [2.5]
    assert terminated.dtype is torch.bool and terminated.shape == (1,)
    assert (terminated.item(), truncated.item(), done.item()) == (True, False, True)


def test_every_step_gets_its_own_memory_across_blocks():
    scalars = StepScalars(rows=3)
    steps = [scalars(float(i), i % 2 == 0, i % 3 == 0) for i in range(10)]  # 4 blocks
    for i, (reward, terminated, truncated, done) in enumerate(steps):
        assert reward.item() == float(i)
        assert terminated.item() == (i % 2 == 0) and truncated.item() == (i % 3 == 0)
        assert done.item() == (i % 2 == 0 or i % 3 == 0)
    steps[0][0].fill_(-1.0)  # writing into one step's tensors leaves the others alone
    steps[0][3].fill_(False)
    assert [s[0].item() for s in steps[1:]] == [float(i) for i in range(1, 10)]
    assert steps[2][3].item() is True
    pointers = {t.data_ptr() for step in steps for t in step}
    assert len(pointers) == 40


def test_numpy_scalars_are_accepted():
    reward, terminated, truncated, done = StepScalars()(np.float64(1.0), np.True_, np.False_)
    assert reward.item() == 1.0 and done.item() is True
    assert terminated.item() is True and truncated.item() is False


@pytest.mark.parametrize("reward", [np.array([1.0, 2.0]), "high"])
def test_a_reward_that_is_not_one_number_is_refused_with_the_fix(reward):
    with pytest.raises(ValueError, match=r"'reward' must be one number .* scalar reward"):
        StepScalars()(reward, False, False)
