"""The staging block of a ``write_behind`` RayReplayBuffer (no Ray needed)."""

from __future__ import annotations

import pickle

import torch
from tensordict import TensorDict

from rl_replay._ray_staging import StagingBlock, block_count, unpack_block


def _ted(start, stop):
    n = stop - start
    return TensorDict(
        {
            "obs": torch.arange(start, stop).float().unsqueeze(-1).expand(n, 3).clone(),
            "done": torch.arange(start, stop).unsqueeze(-1) % 2 == 0,
            ("next", "reward"): torch.arange(start, stop, dtype=torch.float64),
        },
        [n],
    )


def test_rows_come_back_equal_and_in_order():
    block = StagingBlock.build(_ted(0, 4), writes=3)
    assert block.rows == 12
    for start, stop in ((0, 4), (4, 6), (6, 10)):
        assert block.add(_ted(start, stop))
    payload = pickle.loads(pickle.dumps(block.take()))  # as it travels
    assert block_count(payload) == 10 and block.used == 0
    data, sizes = unpack_block(payload)
    assert sizes == [4, 2, 4]
    assert (data == _ted(0, 10)).all()
    assert data["next", "reward"].dtype == torch.float64 and data["done"].dtype == torch.bool


def test_a_write_is_copied_when_it_is_staged():
    block = StagingBlock.build(torch.arange(3), writes=2)
    mine = torch.arange(3)
    block.add(mine)
    mine += 100  # the caller reuses its tensor
    assert unpack_block(block.take())[0].tolist() == [0, 1, 2]


def test_the_block_refuses_what_does_not_fit_and_keeps_its_rows():
    block = StagingBlock.build(_ted(0, 2), writes=2)
    assert block.add(_ted(0, 2))
    other_keys = TensorDict({"obs": torch.zeros(2, 3), "x": torch.zeros(2)}, [2])
    other_dtype = _ted(0, 2).apply(lambda t: t.float())
    assert not block.add(other_keys) and not block.add(other_dtype)
    assert not block.add(torch.zeros(2, 3))
    assert block.add(_ted(2, 4))
    assert not block.add(_ted(4, 5))  # full
    data, sizes = unpack_block(block.take())
    assert sizes == [2, 2] and (data == _ted(0, 4)).all()


def test_what_a_block_cannot_hold():
    assert StagingBlock.build(torch.tensor(1), writes=2) is None  # no batch dim
    assert StagingBlock.build(torch.zeros(2, dtype=torch.bfloat16), writes=2) is None
    assert StagingBlock.build([1, 2], writes=2) is None


def test_another_block_of_the_same_layout():
    block = StagingBlock.build(_ted(0, 2), writes=2)
    other = block.empty_like()
    assert other.same_layout(block) and other.used == 0
    assert other.add(_ted(5, 7))
    assert (unpack_block(other.take())[0] == _ted(5, 7)).all()


def test_rows_read_in_place_reuse_one_buffer_per_chunked_leaf(monkeypatch):
    import rl_replay._ray_staging as staging

    monkeypatch.setattr(staging, "CHUNK", 16)  # every leaf but "done" comes in chunks
    block = StagingBlock.build(_ted(0, 4), writes=2)
    scratch = {}
    for start in (0, 8):
        block.add(_ted(start, start + 4))
        block.add(_ted(start + 4, start + 8))
        payload = pickle.loads(pickle.dumps(block.take()))
        data, sizes = unpack_block(payload, scratch)
        assert sizes == [4, 4] and (data == _ted(start, start + 8)).all()
        if start == 0:
            kept = {leaf: buffer.ctypes.data for leaf, buffer in scratch.items()}
    assert kept and {leaf: b.ctypes.data for leaf, b in scratch.items()} == kept  # reused
