"""How RayReplayBuffer data is packed for Ray, chunked and joined (no Ray needed)."""

from __future__ import annotations

import numpy as np
import torch
from tensordict import TensorDict

from rl_replay._ray_transport import (
    CHUNK,
    count,
    join,
    pack,
    rows_batches,
    rows_head,
    snapshot,
    split_index,
    unpack,
)


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


def _read_only(chunks):
    out = []
    for chunk in chunks:  # as the object store hands them out
        chunk = chunk.copy()
        chunk.flags.writeable = False
        out.append(chunk)
    return out


def test_one_draw_split_in_batches_keeps_every_row_and_its_info():
    td = _td(0, 10)
    info = {"index": pack(torch.arange(100, 110))}
    head, chunks = rows_head(pack(td), [4, 4, 2], info)
    assert len(chunks) == 3 and sum(chunk.nbytes for chunk in chunks) >= td["obs"].numel() * 4
    batches = rows_batches(head, _read_only(chunks))
    assert [batch.shape[0] for batch, _ in batches] == [4, 4, 2]
    assert torch.equal(torch.cat([batch["obs"] for batch, _ in batches]), td["obs"])
    assert [i["index"].tolist() for _, i in batches][2] == [108, 109]
    first, second = batches[0][0], batches[1][0]
    first["obs"] += 1  # each batch is the caller's to modify, apart from the others
    assert second["obs"][0, 0] == 4 and td["obs"][0, 0] == 0


def test_one_draw_of_a_tensor_storage_is_split_too():
    head, chunks = rows_head(pack(torch.arange(12).reshape(6, 2)), [3, 3], None)
    batches = rows_batches(head, _read_only(chunks))
    assert [batch.tolist() for batch, _ in batches] == [
        [[0, 1], [2, 3], [4, 5]],
        [[6, 7], [8, 9], [10, 11]],
    ]
    assert all(info is None for _, info in batches)


def test_a_batch_with_non_numpy_leaves_is_not_joined():
    td = TensorDict({"x": torch.zeros(4, dtype=torch.bfloat16)}, [4])
    assert rows_head(pack(td), [2, 2], None) == (None, [])
    assert rows_head(pack([1, 2]), [1, 1], None) == (None, [])
