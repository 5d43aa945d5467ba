"""RayReplayBuffer on a real local Ray cluster (``ray.init(address="local", num_cpus=2)``, one per module)."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import threading
import time

import pytest
import torch
from tensordict import TensorDict

ray = pytest.importorskip("ray")

from rl_replay import (  # noqa: E402
    LazyTensorStorage,
    ListStorage,
    MinSize,
    PrioritizedSampler,
    Queue,
    RateLimitTimeoutError,
    RayReplayBuffer,
    ReplayActorDiedError,
    SampleToInsertRatio,
    SliceSampler,
)
from rl_replay._ray_shard import BufferShard  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def cluster():
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def plain():
    """One shard, reused (emptied) by the tests that need no special configuration."""
    rb = RayReplayBuffer(storage=LazyTensorStorage(100), batch_size=4)
    yield rb
    rb.shutdown()


@pytest.fixture(scope="module")
def sharded():
    """Two shards, reused (emptied) likewise: every actor costs a worker process."""
    rb = RayReplayBuffer(storage=LazyTensorStorage(64), num_shards=2, batch_size=4)
    yield rb
    rb.shutdown()


@pytest.fixture
def rb(plain):
    plain.empty()
    return plain


@pytest.fixture
def rb2(sharded):
    sharded.empty()
    return sharded


@pytest.fixture
def buffers():
    """Every buffer a test builds is shut down after it, even when it fails."""
    made = []

    def make(**kwargs):
        rb = RayReplayBuffer(**kwargs)
        made.append(rb)
        return rb

    yield make
    for rb in made:
        rb.shutdown()


def _td(start, stop):
    """The one layout written to the shared ``plain`` buffer (a storage keeps its first keys)."""
    n = stop - start
    return TensorDict(
        {"obs": torch.arange(start, stop).float(), ("next", "r"): torch.ones(n, 2)}, [n]
    )


def _pid(rb, shard=0):
    return ray.get(rb._actors[shard].pid.remote())


def _kill(rb, shard=0):
    os.kill(_pid(rb, shard), signal.SIGKILL)


class TestAPI:
    def test_same_calls_as_the_local_buffer(self, rb):
        data = _td(0, 12)
        assert rb.extend(data).tolist() == list(range(12))
        assert rb.add(data[0]) == 12
        assert len(rb) == 13
        sample, info = rb.sample(5, return_info=True)
        assert sample.batch_size == torch.Size([5]) and sample["next", "r"].shape == (5, 2)
        assert torch.equal(sample["obs"], info["index"].float() % 12)
        assert rb[3]["obs"].item() == 3.0 and rb[:4]["obs"].tolist() == [0, 1, 2, 3]
        sample["obs"] += 1  # a sampled batch is the caller's to modify
        rb.empty()
        assert len(rb) == 0

    def test_transform_and_list_storage(self, buffers):
        rb = buffers(storage=ListStorage(10), transform=lambda x: x * 10, batch_size=3)
        rb.extend([torch.tensor(1), torch.tensor(2)])
        assert set(rb.sample().tolist()) <= {10, 20}

    def test_bad_input_is_the_local_error(self, rb):
        rb.extend(_td(0, 3))
        with pytest.raises(ValueError, match="batch_size"):
            rb.sample(0)
        with pytest.raises(KeyError):
            rb.extend(TensorDict({"b": torch.zeros(3)}, [3]))
        assert len(rb) == 3

    @pytest.mark.parametrize(
        "kwargs, match",
        [({"num_shards": 0}, "num_shards"), ({"rate_limiter": 3}, "rate_limiter"),
         ({"checkpoint_every": 5}, "checkpoint_dir"), ({"prefetch": 0}, "prefetch"),
         ({"num_shards": 2, "sampler": SliceSampler(num_slices=2, traj_key="episode")}, "slice_len"),
         ({"rate_limiter": Queue(8)}, "Queue")],
    )  # fmt: skip
    def test_bad_arguments(self, kwargs, match):
        with pytest.raises(ValueError, match=match):
            RayReplayBuffer(storage=LazyTensorStorage(4), **kwargs)

    def test_state_dict_dumps_loads(self, rb, rb2, tmp_path):
        rb2.extend(torch.arange(4))
        rb2.extend(torch.arange(4, 7))
        state = rb2.state_dict()
        rb2.dumps(tmp_path / "ckpt")
        rb2.empty()
        rb2.loads(tmp_path / "ckpt")
        assert len(rb2) == 7
        rb2.empty()
        rb2.load_state_dict(state)
        assert rb2.stats()["inserts"] == 7 and sorted(rb2.sample(64).unique().tolist()) == list(
            range(7)
        )
        with pytest.raises(ValueError, match="num_shards=2"):
            rb.load_state_dict(state)

    def test_prefetch_and_write_behind(self, buffers):
        rb = buffers(storage=LazyTensorStorage(100), batch_size=4, prefetch=2, write_behind=3)
        pending = [rb.extend(torch.arange(i * 10, i * 10 + 10)) for i in range(5)]
        assert pending[-1].result().tolist() == list(range(40, 50))
        assert all(rb.sample().shape == (4,) for _ in range(6))
        assert len(rb) == 50

    def test_a_pickled_copy_is_a_client(self, rb):
        copy = pickle.loads(pickle.dumps(rb))
        copy.extend(_td(0, 3))
        copy.shutdown()  # a copy never kills the actors
        assert len(rb) == 3


class TestSampling:
    def test_uniform_over_shards_of_different_sizes(self, rb2):
        torch.manual_seed(0)
        rb = rb2
        rb.extend(torch.arange(30))  # shard 0
        rb.extend(torch.arange(30, 40))  # shard 1
        counts = torch.zeros(40)
        shard1 = 0
        for _ in range(20):
            sample, info = rb.sample(500, return_info=True)
            counts += torch.bincount(sample, minlength=40)
            shard1 += int((info["shard"] == 1).sum())
        expected = 20 * 500 / 40
        assert (counts - expected).abs().max() < 5 * expected**0.5  # each item ~250 times
        assert abs(shard1 / 10_000 - 0.25) < 0.03

    def test_priorities_across_shards(self, buffers):
        torch.manual_seed(0)
        rb = buffers(
            storage=LazyTensorStorage(8),
            sampler=PrioritizedSampler(8, alpha=1.0, beta=1.0),
            num_shards=2,
            batch_size=1000,
        )
        first = rb.extend(torch.arange(4))
        second = rb.extend(torch.arange(4, 8))
        index = torch.cat([first, second])
        priority = torch.tensor([1.0, 1.0, 1.0, 1.0, 4.0, 4.0, 4.0, 8.0])
        rb.update_priority(index, priority)
        counts = torch.zeros(8)
        for _ in range(10):
            sample, info = rb.sample(return_info=True)
            counts += torch.bincount(sample, minlength=8)
            # importance weights normalised over every shard: (p / min p) ** -beta
            assert torch.allclose(info["priority_weight"], 1 / priority[sample], rtol=1e-4)
        freq = counts / counts.sum()
        assert torch.allclose(freq, priority / priority.sum(), atol=0.02)

    def test_slices_stay_in_one_trajectory(self, buffers):
        data = TensorDict(
            {"episode": torch.arange(4).repeat_interleave(10), "step": torch.arange(40)}, [40]
        )
        rb = buffers(
            storage=LazyTensorStorage(40),
            sampler=SliceSampler(slice_len=5, traj_key="episode"),
            num_shards=2,
            batch_size=20,
        )
        rb.extend(data[:20])
        rb.extend(data[20:])
        for _ in range(5):
            sample = rb.sample().view(4, 5)
            assert (sample["episode"] == sample["episode"][:, :1]).all()
            assert (sample["step"].diff(dim=1) == 1).all()


class TestRateLimits:
    def test_min_size_blocks_times_out_and_wakes_up(self, buffers):
        rb = buffers(
            storage=LazyTensorStorage(100), batch_size=2, rate_limiter=MinSize(5), timeout=1.0
        )
        rb.extend(torch.arange(3))
        start = time.monotonic()
        with pytest.raises(RateLimitTimeoutError, match="Insert more data") as info:
            rb.sample()
        assert 1.0 <= time.monotonic() - start < 3.0
        assert info.value.op == "sample"
        stats = rb.stats()["shards"][0]["rate_limiter"]
        assert stats["blocked_samples"] == 1 and stats["samples"] == 0
        # a learner waiting in another thread goes ahead when a writer (another client,
        # as a collector would hold) brings the data
        writer = pickle.loads(pickle.dumps(rb))
        out = []
        learner = threading.Thread(target=lambda: out.append(rb.sample()))
        learner.start()
        time.sleep(0.05)
        writer.extend(torch.arange(2))
        learner.join(10)
        assert out and out[0].shape == (2,)

    def test_sample_to_insert_ratio_blocks_writers(self, buffers):
        limiter = SampleToInsertRatio(samples_per_insert=2.0, min_size_to_sample=4, error_buffer=8)
        rb = buffers(
            storage=LazyTensorStorage(100), batch_size=4, rate_limiter=limiter, timeout=0.2
        )
        rb.extend(torch.arange(8))  # diff 16 = target 8 + error buffer 8
        with pytest.raises(RateLimitTimeoutError, match="Sample more"):
            rb.extend(torch.arange(1))
        assert len(rb) == 8  # nothing of the refused write was stored
        rb.sample()
        rb.sample()  # 8 samples: room for 4 more inserts
        assert rb.extend(torch.arange(4)).tolist() == [8, 9, 10, 11]
        stats = rb.stats()["shards"][0]["rate_limiter"]
        assert (stats["inserts"], stats["samples"], stats["blocked_inserts"]) == (12, 8, 1)

    def test_queue_reads_each_item_once_in_order(self, buffers):
        rb = buffers(storage=LazyTensorStorage(8), rate_limiter=Queue(6), timeout=0.2)
        rb.extend(torch.arange(5))
        assert rb.sample(3).tolist() == [0, 1, 2]
        rb.extend(torch.arange(5, 9))
        assert rb.sample(4).tolist() == [3, 4, 5, 6]
        assert rb.stats()["shards"][0]["queue_size"] == 2
        with pytest.raises(RateLimitTimeoutError):
            rb.sample(3)


class TestBatching:
    """write_behind stages writes in the client; prefetch brings several batches per call."""

    def test_staged_writes_are_read_by_their_writer_in_order(self, buffers):
        rb = buffers(storage=LazyTensorStorage(100), write_behind=100, flush_interval=None,
                     rate_limiter=Queue(100))  # fmt: skip
        other = pickle.loads(pickle.dumps(rb))  # another client of the same shard
        pending = [rb.extend(torch.arange(i * 3, i * 3 + 3)) for i in range(5)]
        assert not any(p.done() for p in pending)  # staged: nothing sent yet
        assert len(other) == 0
        assert len(rb) == 15  # the writer's own read ships and waits first
        assert [p.result().tolist() for p in pending] == [
            list(range(i * 3, i * 3 + 3)) for i in range(5)
        ]
        assert rb.sample(15).tolist() == list(range(15))  # the FIFO order of the writes
        assert len(other) == 15

    def test_a_closing_client_ships_its_writes_and_a_timer_ships_them_anyway(self, buffers):
        rb = buffers(storage=LazyTensorStorage(100), write_behind=100, flush_interval=None)
        writer = pickle.loads(pickle.dumps(rb))  # as a collector actor holds it
        writer.extend(torch.arange(3))
        assert len(rb) == 0
        writer.shutdown()  # ships before letting go (and leaves the actors alive)
        assert len(rb) == 3
        timed = buffers(storage=LazyTensorStorage(100), write_behind=100, flush_interval=0.05)
        reader = pickle.loads(pickle.dumps(timed))
        timed.extend(torch.arange(4))
        deadline = time.monotonic() + 10
        while len(reader) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(reader) == 4

    def test_an_error_of_a_staged_write_is_raised_by_the_next_call(self, buffers):
        rb = buffers(storage=LazyTensorStorage(100), write_behind=2, flush_interval=None)
        rb.extend(_td(0, 3))
        bad = rb.extend(TensorDict({"b": torch.zeros(3)}, [3]))  # 2 staged: shipped
        rb.extend(_td(3, 5))
        with pytest.raises(KeyError) as info:
            len(rb)
        assert any("staged" in note for note in info.value.__notes__)
        with pytest.raises(KeyError):
            bad.result()
        assert len(rb) == 5  # raised once; the other writes are stored

    def test_a_rate_limited_staged_write_times_out(self, buffers):
        limiter = SampleToInsertRatio(samples_per_insert=2.0, min_size_to_sample=4, error_buffer=8)
        rb = buffers(storage=LazyTensorStorage(100), rate_limiter=limiter, timeout=0.2,
                     write_behind=1)  # fmt: skip
        assert rb.extend(torch.arange(8)).result().tolist() == list(range(8))
        refused = rb.extend(torch.arange(1))
        start = time.monotonic()
        with pytest.raises(RateLimitTimeoutError, match="Sample more"):
            refused.result()
        assert time.monotonic() - start < 5.0
        assert len(rb) == 8

    def test_a_dead_shard_counts_the_staged_writes_as_lost(self, buffers):
        rb = buffers(storage=LazyTensorStorage(10), write_behind=100, flush_interval=None)
        rb.extend(torch.arange(3))
        assert len(rb) == 3
        rb.extend(torch.arange(2))  # staged when the shard dies
        _kill(rb)
        with pytest.raises(ReplayActorDiedError) as info:
            len(rb)
        assert info.value.lost_inserts == 5

    def test_staged_tensordicts_of_two_layouts_are_stored_as_written(self, buffers):
        rb = buffers(storage=ListStorage(100), write_behind=4, flush_interval=None)
        plain = [rb.extend(_td(i * 3, i * 3 + 3)) for i in range(6)]  # 4: one flush
        other = rb.extend(TensorDict({"x": torch.arange(2)}, [2]))  # ships the block first
        last = rb.extend(_td(18, 20))
        positions = [p.result().tolist() for p in (*plain, other, last)]
        assert positions == [[*range(i * 3, i * 3 + 3)] for i in range(6)] + [[18, 19], [20, 21]]
        for i in range(6):
            assert rb[i * 3 + 1]["obs"].item() == i * 3 + 1
        assert rb[19]["x"].item() == 1 and rb[21]["obs"].item() == 19

    def test_a_staged_write_keeps_the_values_it_had_when_written(self, buffers):
        rb = buffers(storage=LazyTensorStorage(100), write_behind=8, flush_interval=None)
        reused = _td(0, 4)
        for step in range(12):  # a collector refilling one tensordict in place
            reused["obs"].copy_(torch.arange(step * 4, step * 4 + 4).float())
            rb.extend(reused)
        assert rb[:]["obs"].tolist() == [float(i) for i in range(48)]

    def test_staged_writes_report_their_positions_past_the_end_of_the_storage(self, buffers):
        rb = buffers(storage=LazyTensorStorage(10), write_behind=2, flush_interval=None)
        pending = [rb.extend(torch.arange(i * 3, i * 3 + 3)) for i in range(4)]  # 2 flushes
        rb._flush()
        assert [p.result().tolist() for p in pending] == [
            [0, 1, 2],
            [3, 4, 5],
            [6, 7, 8],
            [9, 0, 1],
        ]
        assert rb[:].tolist() == [10, 11, 2, 3, 4, 5, 6, 7, 8, 9]

    def test_staged_writes_round_robin_over_shards_in_order(self, buffers):
        rb = buffers(storage=LazyTensorStorage(50), write_behind=3, num_shards=2,
                     flush_interval=0.05)  # fmt: skip
        pending = [rb.extend(_td(i * 2, i * 2 + 2)) for i in range(10)]
        rb._flush()
        got = [p.result() for p in pending]
        assert [g.tolist() for g in got[:4]] == [[0, 1], [50, 51], [2, 3], [52, 53]]
        stored = rb.sample(200, return_info=True)
        values = dict(zip(stored[1]["index"].tolist(), stored[0]["obs"].tolist(), strict=True))
        for i, index in enumerate(got):
            for k, position in enumerate(index.tolist()):
                assert values.get(position, i * 2 + k) == i * 2 + k

    def test_prefetched_batches_of_one_draw_hold_stored_items(self, buffers):
        rb = buffers(storage=LazyTensorStorage(100), batch_size=16, prefetch=4)
        rb.extend(_td(0, 40))
        for _ in range(6):
            data, info = rb.sample(return_info=True)
            assert data.shape == (16,)
            assert data["obs"].tolist() == info["index"].float().tolist()

    def test_prefetch_brings_several_batches_per_call(self, buffers):
        rb = buffers(storage=LazyTensorStorage(20), batch_size=2, rate_limiter=Queue(20),
                     timeout=0.3, prefetch=4)  # fmt: skip
        rb.extend(torch.arange(10))
        first = rb.sample().tolist()
        assert rb.stats()["shards"][0]["queue_size"] <= 2  # 4 batches came in one call
        rest = [rb.sample().tolist() for _ in range(4)]  # the last call got only 1 of 4
        assert [first, *rest] == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]
        start = time.monotonic()
        with pytest.raises(RateLimitTimeoutError):
            rb.sample()
        assert time.monotonic() - start < 5.0


class TestShards:
    def test_writes_are_routed_in_turn(self, rb2):
        indices = [rb2.extend(torch.arange(2)).tolist() for _ in range(3)]
        assert indices == [[0, 1], [64, 65], [2, 3]]
        assert [s["len"] for s in rb2.stats()["shards"]] == [4, 2]
        assert len(rb2) == 6
        with pytest.raises(NotImplementedError, match="sharded"):
            rb2[0]


class TestFaults:
    def test_a_killed_shard_raises_within_two_seconds(self, buffers):
        rb = buffers(storage=LazyTensorStorage(10), batch_size=2, rate_limiter=MinSize(5))
        rb.extend(torch.arange(3))
        out = []

        def blocked_sample():
            try:
                rb.sample()
            except Exception as err:  # what the waiting learner sees
                out.append((err, time.monotonic()))

        learner = threading.Thread(target=blocked_sample)
        learner.start()
        time.sleep(0.3)
        killed = time.monotonic()
        _kill(rb)
        learner.join(5)
        err, when = out[0]
        assert isinstance(err, ReplayActorDiedError) and when - killed < 2.0
        assert err.lost_inserts == 3 and not err.restarted
        with pytest.raises(ReplayActorDiedError, match="dead"):
            len(rb)

    def test_a_restarted_shard_reloads_its_last_dumps(self, buffers, tmp_path):
        rb = buffers(storage=LazyTensorStorage(20), batch_size=2, max_restarts=1)
        rb.extend(torch.arange(6))
        rb.dumps(tmp_path / "ckpt")
        rb.extend(torch.arange(6, 10))  # not in the checkpoint
        _kill(rb)
        start = time.monotonic()
        with pytest.raises(ReplayActorDiedError) as info:
            rb.extend(torch.arange(10, 12))
        # the dead call fails at once (2 s on a quiet machine, see the test above; slack
        # here for a loaded one)
        assert time.monotonic() - start < 5.0 and info.value.restarted
        assert len(rb) == 6  # waits for the restart, then restores
        stats = rb.stats()
        assert (stats["restarts"], stats["lost_inserts"]) == (1, 4)
        assert stats["shards"][0]["restored_from"] == str(tmp_path / "ckpt" / "shard_0")
        assert rb.extend(torch.arange(2)).tolist() == [6, 7]

    def test_periodic_checkpoints_restore_a_new_shard(self, tmp_path):
        # What a restarted actor does at start-up, without Ray.
        kwargs = {"storage": LazyTensorStorage(20), "batch_size": 2}
        shard = BufferShard(kwargs, checkpoint_dir=str(tmp_path), checkpoint_every=4)
        for _ in range(5):
            shard.extend(torch.arange(2))
        reborn = BufferShard(kwargs, checkpoint_dir=str(tmp_path), checkpoint_every=4)
        assert reborn.restored["inserts"] == 8 and len(reborn.rb) == 8

    def test_shutdown_leaves_no_actor(self):
        rb = RayReplayBuffer(storage=LazyTensorStorage(10))
        ids = [actor._actor_id.hex() for actor in rb._actors]
        rb.shutdown()
        rb.shutdown()  # idempotent
        time.sleep(0.5)
        # ray._private.state is the only actor table reachable without the dashboard
        table = ray._private.state.actors()
        assert all(table[i]["State"] == "DEAD" for i in ids)


def test_without_ray_the_error_names_the_extra():
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "import rl_replay\n"
        "try:\n    rl_replay.RayReplayBuffer()\n"
        "except ImportError as err:\n    print(err)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'rl-replay[ray]'" in out.stdout
