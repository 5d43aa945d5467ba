"""Shared helpers for the sampler tests: a storage double and brute-force references."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
import torch
from tensordict import TensorDict


class CountingStorage:
    """A minimal storage following the contract, counting how often entries are read."""

    def __init__(self, data: TensorDict, *, ndim: int = 1) -> None:
        self.data = data
        self.ndim = ndim
        self.reads = 0
        self.length = data.batch_size[:ndim].numel()

    @property
    def shape(self) -> torch.Size:
        return self.data.batch_size[: self.ndim]

    @property
    def _len_along_dim0(self) -> int:
        return self.length // max(1, self.shape[1:].numel())

    def __len__(self) -> int:
        return self.length

    def _get_entry(self, key, index=None):
        self.reads += 1
        value = self.data.get(key)
        return value if index is None else value[index]

    def __getitem__(self, index):
        self.reads += 1
        return self.data[index]


class WriteLog:
    """Brute-force model of a ring storage: for every position, its write stamp and values."""

    def __init__(self, rows: int, cols: int) -> None:
        self.rows, self.cols = rows, cols
        self.stamp = [None] * rows
        self.traj = [[None] * rows for _ in range(cols)]
        self.done = [[None] * rows for _ in range(cols)]
        self.counter = 0

    def write(self, rows, traj, done) -> None:
        for i, row in enumerate(rows):
            self.stamp[row] = self.counter
            self.counter += 1
            for col in range(self.cols):
                self.traj[col][row] = int(traj[i][col])
                self.done[col][row] = bool(done[i][col])

    def continues(self, col: int, row: int, mode: str) -> bool:
        """Whether ``row + 1`` (mod rows) continues ``row`` in column ``col``."""
        nxt = (row + 1) % self.rows
        if (
            self.stamp[row] is None
            or self.stamp[nxt] is None
            or self.stamp[nxt] != self.stamp[row] + 1
        ):
            return False
        if mode == "traj":
            return self.traj[col][nxt] == self.traj[col][row]
        return not self.done[col][row]

    def slices(self, seq_len: int, mode: str) -> dict[tuple[int, int], bool]:
        """Every valid slice start ``(row, col)`` -> whether the slice ends its trajectory."""
        out = {}
        for col in range(self.cols):
            for row in range(self.rows):
                if self.stamp[row] is None:
                    continue
                if all(
                    self.continues(col, (row + j) % self.rows, mode) for j in range(seq_len - 1)
                ):
                    last = (row + seq_len - 1) % self.rows
                    out[(row, col)] = self.ends(col, last, mode)
        return out

    def segments(self, mode: str) -> list[tuple[int, int, int, bool]]:
        """Every maximal trajectory run ``(row, col, length, ends_trajectory)``."""
        out = []
        for col in range(self.cols):
            for row in range(self.rows):
                if self.stamp[row] is None or self.continues(col, (row - 1) % self.rows, mode):
                    continue
                length = 1
                while length < self.rows and self.continues(
                    col, (row + length - 1) % self.rows, mode
                ):
                    length += 1
                last = (row + length - 1) % self.rows
                out.append((row, col, length, self.ends(col, last, mode)))
        return out

    def ends(self, col: int, row: int, mode: str) -> bool:
        """Whether ``row`` is a recorded end of its trajectory."""
        if mode == "end":
            return self.done[col][row]
        nxt = (row + 1) % self.rows
        written_next = self.stamp[nxt] is not None and self.stamp[nxt] == self.stamp[row] + 1
        return written_next and self.traj[col][nxt] != self.traj[col][row]


@pytest.fixture
def make_counting_storage():
    return CountingStorage


@pytest.fixture
def make_write_log():
    return WriteLog


def run_concurrently(write: Callable[[], None], read: Callable[[], None]) -> list[BaseException]:
    """Run ``write`` once in one thread while another thread calls ``read`` in a loop.

    Returns the exceptions raised on either side (empty when both behaved).
    """
    errors: list[BaseException] = []
    done = threading.Event()

    def writer():
        try:
            write()
        except BaseException as err:  # collected and returned to the test
            errors.append(err)
        finally:
            done.set()

    def reader():
        try:
            while not done.is_set():
                read()
        except BaseException as err:  # collected and returned to the test
            errors.append(err)

    threads = [threading.Thread(target=writer), threading.Thread(target=reader)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


@pytest.fixture
def concurrently():
    return run_concurrently
