"""How RayReplayBuffer data is packed for Ray, chunked and joined (no Ray needed)."""

from __future__ import annotations

import numpy as np
import torch
from tensordict import TensorDict

from rl_replay._ray_transport import CHUNK, count, join, pack, snapshot, split_index, unpack


def _td(start, stop, width=3):
    n = stop - start
    obs = torch.arange(start, stop).float()[:, None].expand(n, width).contiguous()
    return TensorDict({"obs": obs, ("next", "done"): torch.zeros(n, 1, dtype=torch.bool)}, [n])


def test_a_big_tensordict_travels_in_chunks_and_comes_back_whole():
    td = _td(0, 2 * CHUNK // 12, width=3)  # float32 x 3: more than two chunks
    packed = pack(td)
    assert isinstance(packed[2], list) and all(part.size <= CHUNK for part in packed[2])
    back = unpack(packed)
    assert (back == td).all()
    back["obs"] += 1  # the caller's to modify
    assert td["obs"][0, 0] == 0


def test_join_makes_one_batch_of_each_run_of_one_layout():
    items = [pack(_td(0, 3)), pack(_td(3, 5)), pack(torch.arange(4)), pack(_td(5, 6))]
    joined, sizes = join(items)
    assert sizes == [[3, 2], [4], [1]]
    whole = unpack(joined[0])
    assert whole["obs"][:, 0].tolist() == [0, 1, 2, 3, 4] and whole["next", "done"].shape == (5, 1)
    assert [count(item) for item in joined] == [5, 4, 1]
    parts = split_index(torch.arange(10, 15), sizes[0])
    assert [part.tolist() for part in parts] == [[10, 11, 12], [13, 14]]


def test_a_joined_write_of_chunked_batches_keeps_every_row():
    big, small = _td(0, CHUNK // 8), _td(7, 9)
    joined, sizes = join([pack(big), pack(small)])
    whole = unpack(joined[0])
    assert sizes == [[big.shape[0], 2]]
    assert torch.equal(whole["obs"], torch.cat([big["obs"], small["obs"]]))


def test_a_snapshot_does_not_see_later_changes():
    data = torch.arange(4)
    staged = snapshot(pack(data))
    data += 10
    assert unpack(staged).tolist() == [0, 1, 2, 3]
    lst = [np.zeros(2)]
    kept = snapshot(pack(lst))
    lst[0][0] = 5
    assert kept[0][0] == 0
