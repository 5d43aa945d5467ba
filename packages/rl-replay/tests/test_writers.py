"""Writers: cursor handling, ranking, immutability, state and checkpoints."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_replay import (
    ImmutableDatasetWriter,
    LazyTensorStorage,
    ListStorage,
    RoundRobinWriter,
    TensorDictMaxValueWriter,
    TensorDictRoundRobinWriter,
    TensorStorage,
    Writer,
)


def _bound(writer, storage):
    writer.register_storage(storage)
    return writer


class TestWriter:
    def test_is_abstract(self):
        with pytest.raises(TypeError, match="abstract"):
            Writer()

    def test_write_without_storage_raises(self):
        with pytest.raises(RuntimeError, match="register_storage"):
            RoundRobinWriter().add(torch.zeros(()))


class TestRoundRobinWriter:
    def test_add_returns_successive_positions_and_wraps(self):
        writer = _bound(RoundRobinWriter(), LazyTensorStorage(3))
        assert [writer.add(torch.tensor(float(i))) for i in range(4)] == [0, 1, 2, 0]
        assert writer._storage.get(torch.arange(3)).tolist() == [3.0, 1.0, 2.0]

    def test_extend_wraps_around(self):
        storage = LazyTensorStorage(5)
        writer = _bound(RoundRobinWriter(), storage)
        writer.extend(torch.arange(4))
        index = writer.extend(torch.arange(4, 7))
        assert index.tolist() == [4, 0, 1]
        assert storage.get(torch.arange(5)).tolist() == [5, 6, 2, 3, 4]
        assert len(storage) == 5 and writer._cursor == 2

    def test_extend_longer_than_storage_keeps_the_last_elements(self):
        storage = LazyTensorStorage(4)
        writer = _bound(RoundRobinWriter(), storage)
        writer.extend(torch.arange(6))
        assert storage.get(torch.arange(4)).tolist() == [4, 5, 2, 3] and writer._cursor == 2

    def test_works_with_list_storage(self):
        storage = ListStorage(3)
        writer = _bound(RoundRobinWriter(), storage)
        writer.extend(["a", "b"])
        writer.extend(["c", "d"])
        assert storage.get(slice(None)) == ["d", "b", "c"]

    def test_scalar_batch_extend_raises(self):
        writer = _bound(RoundRobinWriter(), LazyTensorStorage(3))
        with pytest.raises(ValueError, match="leading batch dim"):
            writer.extend(torch.tensor(1.0))

    def test_failed_extend_does_not_move_the_cursor(self):
        writer = _bound(RoundRobinWriter(), LazyTensorStorage(4))
        writer.extend(torch.zeros(2, 3))
        with pytest.raises(ValueError, match="expected entry"):
            writer.extend(torch.zeros(2, 5))
        assert writer._cursor == 2

    def test_state_dict_and_dumps_round_trip(self, tmp_path):
        writer = _bound(RoundRobinWriter(), LazyTensorStorage(4))
        writer.extend(torch.zeros(3))
        other = RoundRobinWriter()
        other.load_state_dict(writer.state_dict())
        assert other._cursor == 3
        writer.dumps(tmp_path)
        restored = RoundRobinWriter()
        restored.loads(tmp_path)
        assert restored._cursor == 3

    def test_loads_from_other_writer_class_raises(self, tmp_path):
        RoundRobinWriter().dumps(tmp_path)
        with pytest.raises(ValueError, match="written by RoundRobinWriter"):
            TensorDictMaxValueWriter().loads(tmp_path)

    def test_loads_missing_file_raises(self, tmp_path):
        with pytest.raises(FileNotFoundError, match="does not exist"):
            RoundRobinWriter().loads(tmp_path / "nowhere")


class TestTensorDictRoundRobinWriter:
    def test_writes_tensordicts(self):
        storage = LazyTensorStorage(4)
        writer = _bound(TensorDictRoundRobinWriter(), storage)
        assert writer.extend(TensorDict({"a": torch.ones(2)}, [2])).tolist() == [0, 1]
        assert writer.add(TensorDict({"a": torch.tensor(2.0)}, [])) == 2

    @pytest.mark.parametrize("method", ["add", "extend"])
    def test_rejects_non_tensordicts(self, method):
        writer = _bound(TensorDictRoundRobinWriter(), LazyTensorStorage(4))
        with pytest.raises(TypeError, match="expected a tensordict, got Tensor"):
            getattr(writer, method)(torch.zeros(2))


class TestTensorDictMaxValueWriter:
    @staticmethod
    def _data(values, key="key"):
        return TensorDict(
            {key: torch.tensor(values, dtype=torch.float), "id": torch.arange(len(values))},
            [len(values)],
        )

    def test_keeps_the_top_elements(self):
        storage = LazyTensorStorage(3)
        writer = _bound(TensorDictMaxValueWriter(rank_key="key"), storage)
        writer.extend(self._data([1.0, 2.0, 3.0]))
        written = writer.extend(self._data([0.5, 10.0]))
        assert written.tolist() == [0]
        assert sorted(storage.get(torch.arange(3))["key"].tolist()) == [2.0, 3.0, 10.0]

    @pytest.mark.parametrize("default", [torch.float64, torch.float16])
    def test_ranking_ignores_the_default_dtype(self, default):
        previous = torch.get_default_dtype()
        torch.set_default_dtype(default)
        try:
            storage = LazyTensorStorage(2)
            writer = _bound(TensorDictMaxValueWriter(rank_key="key"), storage)
            writer.extend(self._data([1.0, 2.0]))
            assert writer.extend(self._data([1.5])).tolist() == [0]
            assert sorted(storage.get(torch.arange(2))["key"].tolist()) == [1.5, 2.0]
        finally:
            torch.set_default_dtype(previous)

    def test_add_below_the_minimum_is_dropped(self):
        storage = LazyTensorStorage(2)
        writer = _bound(TensorDictMaxValueWriter(rank_key="key"), storage)
        writer.extend(self._data([5.0, 6.0]))
        assert writer.add(self._data([1.0])[0]) is None
        assert writer.add(self._data([7.0])[0]) == 0

    @pytest.mark.parametrize(
        ("reduction", "expected"), [("sum", 3.0), ("max", 2.0), ("min", 1.0), ("mean", 1.5)]
    )
    def test_reduction_over_trailing_dims(self, reduction, expected):
        storage = LazyTensorStorage(1)
        writer = _bound(TensorDictMaxValueWriter(rank_key="r", reduction=reduction), storage)
        writer.extend(TensorDict({"r": torch.tensor([[1.0, 2.0]])}, [1]))
        assert writer._ranks.tolist() == [expected]

    def test_default_rank_key_is_next_reward(self):
        storage = LazyTensorStorage(2)
        writer = _bound(TensorDictMaxValueWriter(), storage)
        writer.extend(TensorDict({("next", "reward"): torch.tensor([[1.0], [3.0], [2.0]])}, [3]))
        assert sorted(storage.get(torch.arange(2))["next", "reward"].squeeze(-1).tolist()) == [
            2.0,
            3.0,
        ]

    def test_unknown_reduction_raises(self):
        with pytest.raises(ValueError, match="reduction in"):
            TensorDictMaxValueWriter(reduction="prod")

    def test_missing_rank_key_raises(self):
        writer = _bound(TensorDictMaxValueWriter(rank_key="score"), LazyTensorStorage(2))
        with pytest.raises(KeyError, match="rank key 'score'"):
            writer.extend(self._data([1.0]))

    def test_non_tensordict_raises(self):
        writer = _bound(TensorDictMaxValueWriter(), LazyTensorStorage(2))
        with pytest.raises(TypeError, match="expected a tensordict"):
            writer.extend(torch.zeros(2))

    def test_multi_dim_storage_raises(self):
        writer = _bound(TensorDictMaxValueWriter(rank_key="key"), LazyTensorStorage(4, ndim=2))
        with pytest.raises(ValueError, match="ndim=1"):
            writer.extend(TensorDict({"key": torch.zeros(2, 2)}, [2, 2]))

    def test_unbounded_storage_raises(self):
        writer = _bound(TensorDictMaxValueWriter(rank_key="key"), ListStorage())
        with pytest.raises(ValueError, match="bounded storage"):
            writer.extend(self._data([1.0]))

    def test_empty_and_dumps_round_trip(self, tmp_path):
        storage = LazyTensorStorage(2)
        writer = _bound(TensorDictMaxValueWriter(rank_key="key"), storage)
        writer.extend(self._data([4.0, 5.0]))
        writer.dumps(tmp_path)
        restored = _bound(TensorDictMaxValueWriter(rank_key="key"), storage)
        restored.loads(tmp_path)
        assert restored._ranks.tolist() == [4.0, 5.0]
        writer._empty()
        assert writer._ranks is None


class TestImmutableDatasetWriter:
    @pytest.mark.parametrize("method", ["add", "extend"])
    def test_every_write_raises(self, method):
        writer = _bound(ImmutableDatasetWriter(), TensorStorage(torch.zeros(3)))
        with pytest.raises(RuntimeError, match="immutable"):
            getattr(writer, method)(torch.zeros(1))

    def test_empty_is_a_no_op(self):
        writer = ImmutableDatasetWriter()
        writer._empty()
        assert writer.state_dict() == {}
