"""Reusable contract tests for storages: subclass :class:`StorageContract` in a test module.

The contract is written with plain asserts so it runs under any test runner;
a subclass provides :meth:`StorageContract.make_storage`,
:meth:`StorageContract.make_data` and, if needed, :meth:`StorageContract.assert_same`.
"""

from __future__ import annotations

import tempfile
from typing import Any

import torch
from tensordict import TensorDict, is_tensor_collection

__all__ = ["StorageContract", "extend_from_worker", "extend_one_at_a_time"]


def extend_from_worker(rb: Any, value: float = 1.0, count: int = 10) -> None:  # Any: a buffer
    """Extend ``rb`` with ``count`` elements ``{"a": value}``: a process target for sharing tests.

    It lives in an importable module so that ``spawn`` workers can find it.
    """
    rb.extend(TensorDict({"a": torch.full((count,), value)}, [count]))


def extend_one_at_a_time(rb: Any, start: float, count: int) -> None:  # Any: a buffer
    """Extend ``rb`` ``count`` times with one element ``{"a": start + i}``: a process target.

    Many small writes from several processes at once exercise the shared write cursor.
    """
    for i in range(count):
        rb.extend(TensorDict({"a": torch.full((1,), start + i)}, [1]))


class StorageContract:
    """What every :class:`~rl_replay.Storage` must do (pytest collects the ``test_*`` methods)."""

    max_size = 8

    def make_storage(self, max_size: int) -> Any:  # Any: a Storage
        """Return a fresh storage of capacity ``max_size``."""
        raise NotImplementedError

    def make_data(self, count: int, offset: int = 0) -> Any:  # Any: a batch of ``count`` elements
        """Return a batch of ``count`` distinct elements (element ``i`` built from ``offset + i``)."""
        raise NotImplementedError

    def assert_same(self, found: Any, expected: Any) -> None:  # Any: batches
        if isinstance(found, torch.Tensor) or is_tensor_collection(found):
            assert (found == expected).all(), (found, expected)
        else:
            assert list(found) == list(expected), (found, expected)

    def test_len_is_zero_before_any_write(self) -> None:
        assert len(self.make_storage(self.max_size)) == 0

    def test_set_then_get_returns_the_written_elements(self) -> None:
        storage = self.make_storage(self.max_size)
        storage.set(torch.arange(3), self.make_data(3))
        assert len(storage) == 3
        self.assert_same(storage.get(torch.tensor([2, 0])), self._pick(self.make_data(3), [2, 0]))

    def test_set_without_cursor_keeps_the_length(self) -> None:
        storage = self.make_storage(self.max_size)
        storage.set(torch.arange(4), self.make_data(4))
        storage.set(torch.tensor([1]), self.make_data(1, offset=10), set_cursor=False)
        assert len(storage) == 4
        self.assert_same(storage.get(torch.tensor([1])), self.make_data(1, offset=10))

    def test_empty_forgets_every_element(self) -> None:
        storage = self.make_storage(self.max_size)
        storage.set(torch.arange(2), self.make_data(2))
        storage._empty()
        assert len(storage) == 0

    def test_state_dict_round_trip(self) -> None:
        storage = self.make_storage(self.max_size)
        storage.set(torch.arange(3), self.make_data(3))
        restored = self.make_storage(self.max_size)
        restored.load_state_dict(storage.state_dict())
        assert len(restored) == 3
        self.assert_same(restored.get(torch.arange(3)), self.make_data(3))

    def test_dumps_loads_round_trip(self) -> None:
        storage = self.make_storage(self.max_size)
        storage.set(torch.arange(3), self.make_data(3))
        path = tempfile.mkdtemp()
        storage.dumps(path)
        restored = self.make_storage(self.max_size)
        restored.loads(path)
        assert len(restored) == 3
        self.assert_same(restored.get(torch.arange(3)), self.make_data(3))

    def _pick(self, batch: Any, positions: list[int]) -> Any:  # Any: a batch
        if isinstance(batch, list):
            return [batch[i] for i in positions]
        return batch[torch.tensor(positions)]
