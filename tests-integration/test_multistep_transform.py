"""MultiStepTransform (rl-transforms, on rl_replay.MultiStep) in a ReplayBuffer."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_replay import LazyTensorStorage, MultiStep, ReplayBuffer
from rl_transforms import MultiStepTransform


def _chunk(start: int, stop: int, done_at: int | None = None) -> TensorDict:
    obs = torch.arange(start, stop + 1, dtype=torch.float32)
    done = torch.zeros(stop - start, 1, dtype=torch.bool)
    if done_at is not None:
        done[done_at - start] = True
    return TensorDict(
        {
            "obs": obs[:-1],
            "next": {"obs": obs[1:], "reward": torch.ones(stop - start, 1), "done": done},
        },
        [stop - start],
    )


def test_chunked_extends_match_one_multistep_over_the_whole_rollout():
    rb = ReplayBuffer(storage=LazyTensorStorage(100), transform=MultiStepTransform(3, 0.9))
    for start in range(0, 30, 10):
        rb.extend(_chunk(start, start + 10, done_at=start + 5))
    whole = torch.cat([_chunk(s, s + 10, done_at=s + 5) for s in range(0, 30, 10)])
    expected = MultiStep(0.9, 3)(whole)[:27]
    stored = rb[:]
    assert len(rb) == 27  # the last n_steps steps wait for more data
    for key in (("next", "obs"), ("next", "reward"), "steps_to_next_obs", "gamma"):
        torch.testing.assert_close(stored[key], expected[key])
    torch.testing.assert_close(stored["next", "reward_orig"], whole["next", "reward"][:27])
    torch.testing.assert_close(stored["next", "original_reward"], whole["next", "reward"][:27])


def test_two_dim_batches_keep_the_env_dim():
    t = MultiStepTransform(2, 1.0)
    data = torch.stack([_chunk(0, 6), _chunk(10, 16)])
    out = t.inv(data)
    assert out.batch_size == (2, 4)
    assert out["next", "obs"][1].tolist() == [12.0, 13.0, 14.0, 15.0]


def test_single_transitions_are_steps():
    t = MultiStepTransform(3, 1.0)
    whole = _chunk(0, 10)
    assert t.inv(whole[0]).batch_size == (0,)  # a batch-size-[] transition is one step
    rb = ReplayBuffer(storage=LazyTensorStorage(100), transform=MultiStepTransform(3, 1.0))
    for i in range(10):
        rb.extend(whole[i].unsqueeze(0))
    stored = rb[:]
    assert len(rb) == 7
    assert (stored["steps_to_next_obs"] == 3).all()
    assert stored["next", "obs"].tolist() == [3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]


def test_add_writes_single_transitions_once_their_return_is_known():
    whole = _chunk(0, 10)
    rb = ReplayBuffer(storage=LazyTensorStorage(100), transform=MultiStepTransform(3, 1.0))
    positions = [rb.add(whole[i]) for i in range(10)]
    assert positions == [None, None, None, 0, 1, 2, 3, 4, 5, 6]  # nothing ready, then one each
    stored = rb[:]
    assert stored.batch_size == (7,)
    assert stored["obs"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert stored["next", "obs"].tolist() == [3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]


def test_bad_settings_and_env_use_raise():
    with pytest.raises(ValueError, match="n_steps"):
        MultiStepTransform(0, 0.9)
    with pytest.raises(RuntimeError, match="inverse transform for replay buffers"):
        MultiStepTransform(2, 0.9)._call(_chunk(0, 2))
