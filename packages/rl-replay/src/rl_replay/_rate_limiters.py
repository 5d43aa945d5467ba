"""Rate limiters: how far sampling may run ahead of (or behind) insertion.

The semantics are Reverb's. A limiter counts inserted items and sampled items and
keeps ``diff = inserts * samples_per_insert - samples`` inside ``[min_diff,
max_diff]``; sampling is also refused until ``min_size_to_sample`` items were
inserted. An insert or a sample that would leave the window waits (up to a
timeout) for the other side to move, then raises :class:`RateLimitTimeoutError`.

A limiter is a plain, thread-safe object (one :class:`threading.Condition`), so it
only makes sense where inserts and samples come from different threads or
processes: :class:`~rl_replay.RayReplayBuffer` runs one per shard inside its actor,
where writers and learners call concurrently. A single-threaded loop on a local
buffer would only wait for itself, so the local ``ReplayBuffer`` takes none.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

__all__ = ["MinSize", "Queue", "RateLimitTimeoutError", "RateLimiter", "SampleToInsertRatio"]


class RateLimitTimeoutError(TimeoutError):
    """An insert or a sample waited longer than its timeout for the rate limiter.

    Attributes:
        op (str): ``"insert"`` or ``"sample"``.
        stats (dict): the limiter's counters when the wait gave up.
    """

    def __init__(self, message: str, *, op: str = "", stats: dict[str, Any] | None = None):
        super().__init__(message)
        self.op = op
        self.stats = dict(stats or {})

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_timeout, (str(self), self.op, self.stats))


def _rebuild_timeout(message: str, op: str, stats: dict[str, Any]) -> RateLimitTimeoutError:
    return RateLimitTimeoutError(message, op=op, stats=stats)


class RateLimiter:
    """Keep ``inserts * samples_per_insert - samples`` within ``[min_diff, max_diff]``.

    Args:
        samples_per_insert (float): how many sampled items one inserted item is worth.
        min_size_to_sample (int): inserts needed before the first sample.
        min_diff (float): lowest allowed ``diff`` after a sample.
        max_diff (float): highest allowed ``diff`` after an insert.

    Raises:
        ValueError: for ``samples_per_insert <= 0``, ``min_size_to_sample < 1`` or
            ``min_diff > max_diff``.

    Examples:
        >>> limiter = RateLimiter(samples_per_insert=2.0, min_size_to_sample=1, min_diff=0.0, max_diff=4.0)
        >>> limiter.insert(5, timeout=0)  # only 2 granted: diff would leave [0, 4]
        2
        >>> limiter.sample(3, timeout=0); limiter.stats()["diff"]
        1.0
        >>> try:
        ...     limiter.sample(2, timeout=0.01)  # diff would be -1 < min_diff
        ... except RateLimitTimeoutError as err:
        ...     print(err.op, err.stats["diff"])
        sample 1.0
    """

    def __init__(
        self,
        samples_per_insert: float,
        min_size_to_sample: int,
        min_diff: float,
        max_diff: float,
    ) -> None:
        name = type(self).__name__
        if not samples_per_insert > 0:
            raise ValueError(
                f"{name} expected samples_per_insert > 0, got {samples_per_insert!r}. "
                "Pass the number of times each item should be sampled on average."
            )
        if (
            isinstance(min_size_to_sample, bool)
            or not isinstance(min_size_to_sample, int)
            or (min_size_to_sample < 1)
        ):
            raise ValueError(
                f"{name} expected min_size_to_sample to be an int >= 1, got {min_size_to_sample!r}."
            )
        if min_diff > max_diff:
            raise ValueError(
                f"{name} expected min_diff <= max_diff, got min_diff={min_diff}, "
                f"max_diff={max_diff}. Widen the error buffer."
            )
        self.samples_per_insert = float(samples_per_insert)
        self.min_size_to_sample = min_size_to_sample
        self.min_diff = float(min_diff)
        self.max_diff = float(max_diff)
        self.inserts = 0
        self.samples = 0
        self.blocked_inserts = 0
        self.blocked_samples = 0
        self._cond = threading.Condition()

    # ----------------------------------------------------------------- state
    @property
    def diff(self) -> float:
        """``inserts * samples_per_insert - samples``."""
        return self.inserts * self.samples_per_insert - self.samples

    def stats(self) -> dict[str, Any]:
        """The limiter's configuration and counters."""
        with self._cond:
            return {
                "type": type(self).__name__,
                "samples_per_insert": self.samples_per_insert,
                "min_size_to_sample": self.min_size_to_sample,
                "min_diff": self.min_diff,
                "max_diff": self.max_diff,
                "inserts": self.inserts,
                "samples": self.samples,
                "diff": self.diff,
                "blocked_inserts": self.blocked_inserts,
                "blocked_samples": self.blocked_samples,
            }

    def state_dict(self) -> dict[str, int]:
        """The counters (the configuration comes from the constructor)."""
        with self._cond:
            return {"inserts": self.inserts, "samples": self.samples}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Restore the counters of :meth:`state_dict` and wake any waiter."""
        with self._cond:
            self.inserts = int(state["inserts"])
            self.samples = int(state["samples"])
            self._cond.notify_all()

    def reset(self) -> None:
        """Zero the counters (the buffer was emptied)."""
        self.load_state_dict({"inserts": 0, "samples": 0})

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_cond"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._cond = threading.Condition()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(samples_per_insert={self.samples_per_insert}, "
            f"min_size_to_sample={self.min_size_to_sample}, min_diff={self.min_diff}, "
            f"max_diff={self.max_diff})"
        )

    # ----------------------------------------------------------------- decisions
    def _insertable(self) -> int:
        """How many items may be inserted now."""
        if self.max_diff == math.inf:
            return 1 << 62
        room = math.floor((self.max_diff - self.diff) / self.samples_per_insert + 1e-9)
        before_min = self.min_size_to_sample - self.inserts  # always allowed
        return max(room, before_min, 0)

    def _can_sample(self, count: int) -> bool:
        return self.inserts >= self.min_size_to_sample and self.diff - count >= self.min_diff

    def _wait(self, ready: Any, timeout: float | None, op: str, count: int) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        blocked = False
        while not ready():
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise RateLimitTimeoutError(
                    f"{type(self).__name__}: a {op} of {count} item(s) waited {timeout}s and the "
                    f"limit still holds (inserts={self.inserts}, samples={self.samples}, "
                    f"diff={self.diff}, allowed diff=[{self.min_diff}, {self.max_diff}], "
                    f"min_size_to_sample={self.min_size_to_sample}). "
                    + (
                        "Sample more (or faster) before inserting, or raise the error buffer."
                        if op == "insert"
                        else "Insert more data before sampling, or lower samples_per_insert."
                    ),
                    op=op,
                    stats={"inserts": self.inserts, "samples": self.samples, "diff": self.diff},
                )
            if not blocked:
                blocked = True
                if op == "insert":
                    self.blocked_inserts += 1
                else:
                    self.blocked_samples += 1
            self._cond.wait(remaining)

    # ----------------------------------------------------------------- operations
    def insert(self, count: int, *, timeout: float | None = None) -> int:
        """Wait until at least one item may be inserted; record and return how many may.

        The caller writes the first ``returned`` items of its batch and calls again
        for the rest (the returned number is at most ``count``).

        Raises:
            RateLimitTimeoutError: if no item may be inserted within ``timeout`` seconds.
        """
        with self._cond:
            if count <= 0:
                return 0
            self._wait(lambda: self._insertable() > 0, timeout, "insert", count)
            granted = min(count, self._insertable())
            self.inserts += granted
            self._cond.notify_all()
            return granted

    def sample(self, count: int, *, timeout: float | None = None) -> None:
        """Wait until ``count`` items may be sampled, then record them.

        Raises:
            ValueError: if ``count`` can never be sampled at once under this limiter.
            RateLimitTimeoutError: if the limit still holds after ``timeout`` seconds.
        """
        with self._cond:
            reachable = max(self.max_diff, self.min_size_to_sample * self.samples_per_insert)
            if count > reachable - self.min_diff:
                raise ValueError(
                    f"{type(self).__name__} can never allow a sample of {count} items: the "
                    f"allowed diff window is [{self.min_diff}, {self.max_diff}]. Sample smaller "
                    "batches or widen the error buffer."
                )
            self._wait(lambda: self._can_sample(count), timeout, "sample", count)
            self.samples += count
            self._cond.notify_all()

    def cancel_insert(self, count: int) -> None:
        """Give back ``count`` granted inserts whose write failed."""
        with self._cond:
            self.inserts -= count
            self._cond.notify_all()

    def cancel_sample(self, count: int) -> None:
        """Give back ``count`` recorded samples whose read failed."""
        with self._cond:
            self.samples -= count
            self._cond.notify_all()


class MinSize(RateLimiter):
    """Block sampling until ``min_size_to_sample`` items were inserted; never block inserts.

    Args:
        min_size_to_sample (int): inserts needed before the first sample.

    Examples:
        >>> limiter = MinSize(10)
        >>> limiter.insert(4, timeout=0)
        4
        >>> try:
        ...     limiter.sample(1, timeout=0.01)
        ... except RateLimitTimeoutError as err:
        ...     print(err.op)
        sample
    """

    def __init__(self, min_size_to_sample: int) -> None:
        super().__init__(1.0, min_size_to_sample, -math.inf, math.inf)

    def __repr__(self) -> str:
        return f"MinSize({self.min_size_to_sample})"


class SampleToInsertRatio(RateLimiter):
    """Keep the number of samples per inserted item near ``samples_per_insert``.

    Args:
        samples_per_insert (float): the target ratio of sampled to inserted items.
        min_size_to_sample (int): inserts needed before the first sample.
        error_buffer (float or (float, float)): how far ``diff`` may drift from
            ``min_size_to_sample * samples_per_insert``: a number ``e`` gives the
            window ``[target - e, target + e]``; a pair gives ``[lo, hi]`` directly.

    Raises:
        ValueError: for a negative ``error_buffer``, or one smaller than
            ``samples_per_insert`` (one insert would leave the window), or a bad pair.

    Examples:
        >>> limiter = SampleToInsertRatio(samples_per_insert=1.0, min_size_to_sample=4, error_buffer=8)
        >>> limiter.insert(100, timeout=0)  # up to min_size + error_buffer items ahead
        12
    """

    def __init__(
        self,
        samples_per_insert: float,
        min_size_to_sample: int,
        error_buffer: float | tuple[float, float],
    ) -> None:
        if isinstance(error_buffer, tuple | list):
            if len(error_buffer) != 2:
                raise ValueError(
                    f"SampleToInsertRatio expected error_buffer to be a number or a (min_diff, "
                    f"max_diff) pair, got {error_buffer!r}."
                )
            min_diff, max_diff = (float(x) for x in error_buffer)
        else:
            if error_buffer < samples_per_insert:
                raise ValueError(
                    f"SampleToInsertRatio expected error_buffer >= samples_per_insert (one insert "
                    f"moves diff by samples_per_insert), got error_buffer={error_buffer}, "
                    f"samples_per_insert={samples_per_insert}. Widen the error buffer."
                )
            target = min_size_to_sample * samples_per_insert
            min_diff, max_diff = target - error_buffer, target + error_buffer
        super().__init__(samples_per_insert, min_size_to_sample, min_diff, max_diff)
        self.error_buffer = error_buffer

    def __repr__(self) -> str:
        return (
            f"SampleToInsertRatio(samples_per_insert={self.samples_per_insert}, "
            f"min_size_to_sample={self.min_size_to_sample}, error_buffer={self.error_buffer})"
        )


class Queue(RateLimiter):
    """A FIFO queue of ``size`` items: each inserted item is sampled exactly once, in order.

    A buffer with a ``Queue`` limiter returns the oldest unread items from
    :meth:`~rl_replay.RayReplayBuffer.sample` instead of drawing from its sampler;
    inserts block while ``size`` items wait unread, samples while too few do.

    Args:
        size (int): the most items waiting to be read; at most the storage capacity.

    Raises:
        ValueError: if ``size`` is not a positive int.

    Examples:
        >>> queue = Queue(4)
        >>> queue.insert(10, timeout=0)
        4
        >>> queue.sample(4, timeout=0)
        >>> queue.stats()["diff"]
        0.0
    """

    fifo = True

    def __init__(self, size: int) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"Queue expected size to be a positive int, got {size!r}.")
        super().__init__(1.0, 1, 0.0, float(size))
        self.size = size

    def _insertable(self) -> int:
        return max(math.floor(self.max_diff - self.diff), 0)

    def __repr__(self) -> str:
        return f"Queue({self.size})"
