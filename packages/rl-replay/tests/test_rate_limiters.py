"""Rate limiters on their own (threads stand in for writers and learners)."""

from __future__ import annotations

import math
import pickle
import threading
import time

import pytest

from rl_replay import MinSize, Queue, RateLimiter, RateLimitTimeoutError, SampleToInsertRatio


class TestMinSize:
    def test_sampling_waits_for_min_size_then_never_blocks(self):
        limiter = MinSize(3)
        assert limiter.insert(2, timeout=0) == 2
        with pytest.raises(RateLimitTimeoutError) as info:
            limiter.sample(1, timeout=0.01)
        assert info.value.op == "sample"
        assert limiter.insert(1, timeout=0) == 1
        for _ in range(100):
            limiter.sample(5, timeout=0)
        assert limiter.stats()["samples"] == 500
        assert limiter.stats()["blocked_samples"] == 1

    def test_a_waiting_sample_wakes_up_on_insert(self):
        limiter = MinSize(2)
        done = []
        thread = threading.Thread(target=lambda: done.append(limiter.sample(1, timeout=5)))
        thread.start()
        time.sleep(0.05)
        assert not done
        limiter.insert(2, timeout=0)
        thread.join(2)
        assert done == [None]


class TestSampleToInsertRatio:
    def test_inserts_block_when_sampling_lags(self):
        limiter = SampleToInsertRatio(samples_per_insert=2.0, min_size_to_sample=2, error_buffer=4)
        # window of diff: [0, 8]; the first 2 inserts are always allowed
        assert limiter.insert(10, timeout=0) == 4
        with pytest.raises(RateLimitTimeoutError, match="Sample more") as info:
            limiter.insert(1, timeout=0.01)
        assert info.value.op == "insert"
        limiter.sample(2, timeout=0)
        assert limiter.insert(1, timeout=0) == 1

    def test_samples_block_when_inserting_lags(self):
        limiter = SampleToInsertRatio(samples_per_insert=1.0, min_size_to_sample=1, error_buffer=1)
        limiter.insert(2, timeout=0)  # diff 2, window [0, 2]
        limiter.sample(2, timeout=0)
        with pytest.raises(RateLimitTimeoutError, match="Insert more data"):
            limiter.sample(1, timeout=0.01)

    def test_the_ratio_holds_between_threads(self):
        limiter = SampleToInsertRatio(
            samples_per_insert=4.0, min_size_to_sample=10, error_buffer=20
        )

        def writer():
            for _ in range(200):
                limiter.insert(1, timeout=5)

        def learner():
            for _ in range(190):
                limiter.sample(4, timeout=5)

        threads = [threading.Thread(target=writer), threading.Thread(target=learner)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        stats = limiter.stats()
        assert stats["inserts"] == 200 and stats["samples"] == 760
        assert stats["min_diff"] <= stats["diff"] <= stats["max_diff"]

    def test_error_buffer_pair_gives_the_window(self):
        limiter = SampleToInsertRatio(1.0, 1, (-3.0, 7.0))
        assert (limiter.min_diff, limiter.max_diff) == (-3.0, 7.0)

    @pytest.mark.parametrize("error_buffer", [0.5, (1.0, 2.0, 3.0)])
    def test_bad_error_buffer(self, error_buffer):
        with pytest.raises(ValueError, match="error_buffer"):
            SampleToInsertRatio(1.0, 1, error_buffer)


class TestQueue:
    def test_each_item_once_and_blocking_both_ways(self):
        queue = Queue(3)
        assert queue.insert(5, timeout=0) == 3
        with pytest.raises(RateLimitTimeoutError):
            queue.insert(1, timeout=0.01)
        queue.sample(2, timeout=0)
        assert queue.insert(5, timeout=0) == 2
        queue.sample(3, timeout=0)
        with pytest.raises(RateLimitTimeoutError):
            queue.sample(1, timeout=0.01)

    def test_a_sample_larger_than_the_queue_is_refused_at_once(self):
        with pytest.raises(ValueError, match="never allow a sample of 5"):
            Queue(4).sample(5, timeout=None)

    @pytest.mark.parametrize("size", [0, -1, 2.5, True])
    def test_bad_size(self, size):
        with pytest.raises(ValueError, match="positive int"):
            Queue(size)


class TestRateLimiter:
    @pytest.mark.parametrize(
        "args, match",
        [((0.0, 1, 0.0, 1.0), "samples_per_insert"), ((1.0, 0, 0.0, 1.0), "min_size_to_sample"),
         ((1.0, 1, 2.0, 1.0), "min_diff <= max_diff")],
    )  # fmt: skip
    def test_bad_configuration(self, args, match):
        with pytest.raises(ValueError, match=match):
            RateLimiter(*args)

    def test_state_round_trip_and_pickling(self):
        limiter = SampleToInsertRatio(1.0, 2, 10)
        limiter.insert(5, timeout=0)
        limiter.sample(3, timeout=0)
        copy = pickle.loads(pickle.dumps(limiter))
        assert copy.stats() == limiter.stats()
        other = SampleToInsertRatio(1.0, 2, 10)
        other.load_state_dict(limiter.state_dict())
        assert other.diff == limiter.diff == 2.0

    def test_cancel_gives_back(self):
        limiter = Queue(2)
        limiter.insert(2, timeout=0)
        limiter.cancel_insert(1)
        assert limiter.insert(5, timeout=0) == 1
        limiter.sample(2, timeout=0)
        limiter.cancel_sample(2)
        assert limiter.diff == 2.0

    def test_timeout_error_pickles_with_its_fields(self):
        err = RateLimitTimeoutError("x", op="insert", stats={"diff": 1.0})
        copy = pickle.loads(pickle.dumps(err))
        assert (copy.op, copy.stats, str(copy)) == ("insert", {"diff": 1.0}, "x")
        assert isinstance(copy, TimeoutError)

    def test_unbounded_inserts_for_min_size(self):
        assert MinSize(1).insert(10**9, timeout=0) == 10**9
        assert math.isinf(MinSize(1).max_diff)
