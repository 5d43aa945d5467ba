"""The per-step read/write helpers give what ``get(key, None)`` / ``set`` give, fast path or not."""

from __future__ import annotations

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict

from rl_envs_core.extension import get_entry as read
from rl_envs_core.extension import set_entry as write
from rl_transforms import CatFrames, Compose, ObservationNorm, RewardSum, StepCounter


def _containers():
    plain = TensorDict({"a": torch.zeros(2, 1), "n": {"b": torch.ones(2, 1)}}, [2])
    lazy = LazyStackedTensorDict.lazy_stack([plain[0].clone(), plain[1].clone()], 0)
    return {"plain": plain, "lazy": lazy}


@pytest.mark.parametrize("kind", ["plain", "lazy"])
@pytest.mark.parametrize("key", ["a", ("n", "b"), "missing", ("n", "missing"), ("a",)])
def test_read_matches_get(kind, key):
    td = _containers()[kind]
    expected = td.get(key, None)
    got = read(td, key)
    if expected is None:
        assert got is None
    else:
        assert torch.equal(got, expected)


def test_read_returns_the_stored_object():
    td = TensorDict({"a": torch.zeros(1)}, [])
    td.set_non_tensor("s", "text")
    assert read(td, "a") is td.get("a")
    assert type(read(td, "s")) is type(td.get("s"))


@pytest.mark.parametrize("kind", ["plain", "lazy"])
@pytest.mark.parametrize("key", ["a", "new", ("n", "b"), ("deep", "new")])
def test_write_matches_set(kind, key):
    value = torch.full((2, 1), 7.0)
    ours, ref = _containers()[kind], _containers()[kind]
    write(ours, key, value)
    ref.set(key, value)
    assert set(ours.keys(True, True)) == set(ref.keys(True, True))
    assert (ours == ref).all()


def test_write_validates_like_set():
    td = TensorDict(batch_size=[2])
    with pytest.raises(RuntimeError, match="batch dimension mismatch"):
        write(td, "a", torch.zeros(3))
    td.lock_()
    with pytest.raises(RuntimeError):
        write(td, "a", torch.zeros(2))
    with pytest.raises(RuntimeError):
        td.set("a", torch.zeros(2))


def test_write_keeps_the_tensor_and_converts_other_values():
    td = TensorDict(batch_size=[])
    value = torch.ones(3)
    write(td, "a", value)
    assert td.get("a") is value
    write(td, "b", 1.5)  # a scalar becomes a tensor, as with set
    ref = TensorDict(batch_size=[])
    ref.set("b", 1.5)
    assert torch.equal(td.get("b"), ref.get("b"))


def test_transforms_give_the_same_step_on_plain_and_lazy_data():
    """The hot transforms take the fast path on TensorDicts and the generic one otherwise."""

    def chain():
        return Compose(
            StepCounter(),
            RewardSum(),
            ObservationNorm(loc=1.0, scale=2.0, in_keys=["observation"]),
            CatFrames(2, -1, in_keys=["frame"]),
        )

    root = TensorDict(
        {
            "step_count": torch.tensor([[3], [5]]),
            "episode_reward": torch.tensor([[1.0], [2.0]]),
            "frame": torch.tensor([[1.0, 2.0], [3.0, 4.0]]),
        },
        [2],
    )
    nxt = TensorDict(
        {
            "observation": torch.tensor([[1.0], [2.0]]),
            "reward": torch.tensor([[0.5], [1.5]]),
            "frame": torch.tensor([[7.0], [8.0]]),
            "done": torch.zeros(2, 1, dtype=torch.bool),
        },
        [2],
    )

    def lazy(td):
        return LazyStackedTensorDict.lazy_stack(list(td.clone().unbind(0)), 0)

    fast = chain()._step(root.clone(), nxt.clone())
    generic = chain()._step(lazy(root), lazy(nxt))
    assert type(generic) is LazyStackedTensorDict
    assert set(fast.keys()) == set(generic.keys())
    for key in fast.keys():
        assert torch.equal(fast[key], generic[key]), key
    assert fast["frame"].tolist() == [[2.0, 7.0], [4.0, 8.0]]
    assert fast["step_count"].squeeze(-1).tolist() == [4, 6]
