"""QueryModule and TensorDictMap: keys of a tensordict -> stored tensordicts."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_replay import LazyTensorStorage, ListStorage, QueryModule, SipHash, TensorDictMap


def _keys(*pairs):
    key1 = torch.tensor([[float(a)] for a, _ in pairs])
    key2 = torch.tensor([[float(b)] for _, b in pairs])
    return TensorDict({"key1": key1, "key2": key2}, [len(pairs)])


class TestQueryModule:
    def test_equal_keys_share_an_index(self):
        query = QueryModule(in_keys=["key1", "key2"], index_key="index")
        out = query(_keys((1, 3), (1, 3), (1, 2), (2, 3)))
        assert out["index"].tolist() == [0, 0, 1, 2]
        assert out["_hash"].dtype == torch.int64

    @pytest.mark.parametrize("clone", [True, False])
    def test_clone_returns_a_copy(self, clone):
        td = _keys((1, 1))
        out = QueryModule(in_keys=["key1"], clone=clone)(td)
        assert (out is td) is not clone
        assert ("_index" in td.keys()) is not clone

    def test_keys_are_unravelled(self):
        query = QueryModule(in_keys=[(("key1",),), (("a",), "b")], index_key=("some", ("_index",)))
        assert query.in_keys == ["key1", ("a", "b")]
        assert query.index_key == ("some", "_index")
        assert set(query.hash_module) == {"key1", ("a", "b")}

    def test_missing_key_raises(self):
        with pytest.raises(KeyError, match="expected the entry 'key2'"):
            QueryModule(in_keys=["key1", "key2"])(TensorDict({"key1": torch.zeros(2, 1)}, [2]))

    def test_bad_construction_raises(self):
        with pytest.raises(ValueError, match="at least one in_key"):
            QueryModule(in_keys=[])
        with pytest.raises(ValueError, match="one hash module per in_key"):
            QueryModule(in_keys=["a", "b"], hash_module=[SipHash()])


@pytest.fixture(params=[LazyTensorStorage, ListStorage], ids=["tensor", "list"])
def tdmap(request):
    query = QueryModule(in_keys=["key1", "key2"], index_key="index")
    return TensorDictMap(query_module=query, storage=request.param(100))


class TestTensorDictMap:
    def test_seed_query_and_write(self, tdmap):
        # 002, "TensorDictMap" (data_19, data_20): storage[td] = next_state; storage[td]
        td = _keys((-1, 0), (1, 2), (3, 4), (-3, -4))
        tdmap[td] = TensorDict({"out": torch.tensor([[10.0], [20], [30], [40]])}, [4])
        assert tdmap.contains(td).all() and len(tdmap) == 4
        query = td.clone()
        query["key3"] = torch.zeros(4, 1)  # extra entries are ignored
        assert tdmap[query]["out"].reshape(-1).tolist() == [10.0, 20.0, 30.0, 40.0]

    def test_existing_keys_are_overwritten(self, tdmap):
        tdmap[_keys((1, 1), (2, 2))] = TensorDict({"v": torch.tensor([1.0, 2.0])}, [2])
        tdmap[_keys((2, 2))] = TensorDict({"v": torch.tensor([5.0])}, [1])
        assert tdmap[_keys((1, 1), (2, 2))]["v"].tolist() == [1.0, 5.0]
        assert len(tdmap) == 2

    def test_single_item_without_batch(self, tdmap):
        key = _keys((7, 7))[0]
        tdmap[key] = TensorDict({"v": torch.tensor(3.0)})
        assert key in tdmap
        assert tdmap[key]["v"].item() == 3.0

    def test_contains_tells_which_keys_are_present(self, tdmap):
        tdmap[_keys((1, 1))] = TensorDict({"v": torch.tensor([1.0])}, [1])
        assert tdmap.contains(_keys((1, 1), (9, 9))).tolist() == [True, False]
        assert _keys((9, 9)) not in tdmap

    def test_query_for_a_key_not_in_the_map_raises(self, tdmap):
        tdmap[_keys((1, 1))] = TensorDict({"v": torch.tensor([1.0])}, [1])
        with pytest.raises(KeyError, match="no value for 1 of the 2 queried keys"):
            tdmap[_keys((1, 1), (9, 9))]

    def test_repeated_keys_in_one_write_keep_the_last(self, tdmap):
        tdmap[_keys((1, 1), (1, 1))] = TensorDict({"v": torch.tensor([1.0, 2.0])}, [2])
        assert tdmap[_keys((1, 1))]["v"].tolist() == [2.0]

    def test_write_fn_merges_with_the_stored_value(self):
        query = QueryModule(in_keys=["key1"])

        def add(new, old=None):
            return new if old is None else new + old

        tdmap = TensorDictMap(query_module=query, storage=LazyTensorStorage(10), write_fn=add)
        for _ in range(3):
            tdmap[_keys((1, 0))] = TensorDict({"v": torch.tensor([1.0])}, [1])
        assert tdmap[_keys((1, 0))]["v"].tolist() == [3.0]

    def test_integer_index_reads_slots(self, tdmap):
        tdmap[_keys((1, 1), (2, 2))] = TensorDict({"v": torch.tensor([1.0, 2.0])}, [2])
        assert tdmap[torch.tensor([1])]["v"].tolist() == [2.0]
        with pytest.raises(KeyError, match="queried slots"):
            tdmap[torch.tensor([5])]

    def test_full_map_raises(self):
        tdmap = TensorDictMap(
            query_module=QueryModule(in_keys=["key1"]), storage=LazyTensorStorage(2)
        )
        tdmap[_keys((1, 0), (2, 0))] = TensorDict({"v": torch.zeros(2)}, [2])
        with pytest.raises(RuntimeError, match="max_size=2"):
            tdmap[_keys((3, 0))] = TensorDict({"v": torch.zeros(1)}, [1])

    def test_from_tensordict_pair_and_out_keys(self):
        source = TensorDict(
            {"obs": torch.arange(4.0).unsqueeze(-1), "action": torch.zeros(4, 1)}, [4]
        )
        dest = TensorDict({"reward": torch.ones(4, 1), "extra": torch.zeros(4)}, [4])
        tdmap = TensorDictMap.from_tensordict_pair(
            source, dest, in_keys=["obs"], out_keys=["reward"]
        )
        tdmap[source] = dest
        assert set(tdmap[source].keys()) == {"reward"} and tdmap.max_size == 1000
        with pytest.raises(KeyError, match="'missing'"):
            TensorDictMap.from_tensordict_pair(source, dest, in_keys=["missing"])

    def test_clear_empties_the_map(self, tdmap):
        tdmap[_keys((1, 1))] = TensorDict({"v": torch.tensor([1.0])}, [1])
        tdmap.clear()
        assert len(tdmap) == 0 and _keys((1, 1)) not in tdmap
