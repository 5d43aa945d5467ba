"""SliceSampler against a brute-force enumeration of the valid slices."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensordict import TensorDict

from rl_replay import LazyTensorStorage, ListStorage, ReplayBuffer
from rl_replay.samplers import PrioritizedSliceSampler, SliceSampler

KEYS = {"traj": {"traj_key": "ep"}, "end": {"end_key": ("next", "done")}}
# slices per check: every valid start (probability >= 1/156 strict, >= 1/250 with span)
# is reached but with probability below 1e-8
DRAWS = 3000
LOOSE_DRAWS = 5000


@st.composite
def write_plans(draw):
    """A storage shape, a key mode and a sequence of extends with random episode breaks."""
    cols = draw(st.sampled_from([1, 2]))
    rows = draw(st.integers(3, 12))
    chunks = draw(st.lists(st.integers(1, rows + 2), min_size=1, max_size=5))
    breaks = [
        draw(
            st.lists(st.lists(st.booleans(), min_size=cols, max_size=cols), min_size=n, max_size=n)
        )
        for n in chunks
    ]
    mode = draw(st.sampled_from(["traj", "end"]))
    seq_len = draw(st.integers(1, 4))
    return cols, rows, mode, breaks, seq_len


def fill(plan, make_write_log, **sampler_kwargs):
    """Run the plan's extends on a real buffer; return it and the brute-force write log."""
    cols, rows, mode, breaks, _ = plan
    storage = LazyTensorStorage(rows * cols, ndim=1 if cols == 1 else 2)
    sampler_cls = sampler_kwargs.pop("cls", SliceSampler)
    sampler = sampler_cls(**KEYS[mode], **sampler_kwargs)
    rb = ReplayBuffer(storage=storage, sampler=sampler)
    log = make_write_log(rows, cols)
    episode = torch.zeros(cols, dtype=torch.long)
    for chunk in breaks:
        flags = torch.tensor(
            chunk
        )  # [T, cols]: True = the step ends an episode (end) / opens one (traj)
        traj = episode + flags.long().cumsum(0)
        episode = traj[-1]
        data = TensorDict(
            {"ep": traj.T, ("next", "done"): flags.T.unsqueeze(-1)}, [cols, len(chunk)]
        )
        if mode == "end":  # the stored terminated flags are what info["terminated"] reports
            data["next", "terminated"] = data["next", "done"]
        if cols == 1:
            data = data[0]
        index = rb.extend(data)  # an extend longer than the storage keeps its last elements
        kept = index.numel()
        log.write(index.tolist(), traj[-kept:].tolist(), chunk[-kept:])
    return rb, log


def sampled_slices(index, info, cols):
    """Split a sample at its truncated flags: ``[(rows, col, terminated), ...]``."""
    rows, col = (index, torch.zeros_like(index)) if cols == 1 else index
    done = info["next", "truncated"].squeeze(-1).tolist()
    assert (info["next", "done"] >= info["next", "truncated"]).all()
    terminated = info["next", "terminated"].squeeze(-1).tolist()
    out, start = [], 0
    for i, flag in enumerate(done):
        if flag:
            out.append((rows[start : i + 1].tolist(), int(col[start]), terminated[i]))
            assert col[start : i + 1].unique().numel() == 1
            start = i + 1
    assert start == len(done)
    return out


class TestSliceSampler:
    @settings(
        max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(plan=write_plans())
    def test_strict_slices_match_brute_force(self, plan, make_write_log):
        cols, rows, mode, _, seq_len = plan
        rb, log = fill(plan, make_write_log, slice_len=seq_len)
        expected = log.slices(seq_len, mode)
        if not expected:
            with pytest.raises(RuntimeError, match="no trajectory of at least"):
                rb.sample(seq_len)
            return
        _, info = rb.sample(seq_len * DRAWS, return_info=True)
        slices = sampled_slices(info["index"], info, cols)
        assert len(slices) == DRAWS
        starts = set()
        for slice_rows, col, terminated in slices:
            start = slice_rows[0]
            assert slice_rows == [(start + j) % rows for j in range(seq_len)]
            assert (start, col) in expected
            assert terminated == (mode == "end" and expected[(start, col)])
            starts.add((start, col))
        assert starts == set(expected)

    @pytest.mark.parametrize("span", [False, True, (1, 0), (0, 2)])
    @settings(
        max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(plan=write_plans())
    def test_loose_slices_match_brute_force(self, plan, span, make_write_log):
        cols, rows, mode, _, seq_len = plan
        rb, log = fill(plan, make_write_log, slice_len=seq_len, strict_length=False, span=span)
        left, right = (span, span) if isinstance(span, bool) else span
        left = seq_len - 1 if left is True else min(int(left), seq_len - 1)
        right = seq_len - 1 if right is True else min(int(right), seq_len - 1)
        expected = {}
        for row, col, length, terminal in log.segments(mode):
            for offset in range(-left, max(length - seq_len + right, -left) + 1):
                first, stop = max(offset, 0), min(offset + seq_len, length)
                key = (tuple((row + j) % rows for j in range(first, stop)), col)
                expected[key] = terminal and stop == length
        _, info = rb.sample(seq_len * LOOSE_DRAWS, return_info=True)
        seen = set()
        for slice_rows, col, terminated in sampled_slices(info["index"], info, cols):
            key = (tuple(slice_rows), col)
            assert key in expected
            assert terminated == (mode == "end" and expected[key])
            seen.add(key)
        assert seen == set(expected)

    def test_writes_read_nothing_and_only_the_first_sample_after_them_reads(
        self, make_counting_storage
    ):
        data = TensorDict({"ep": torch.arange(1000) // 10}, [1000])
        storage = make_counting_storage(data)
        sampler = SliceSampler(num_slices=4, traj_key="ep")
        sampler._attach_storage(storage)
        for start in range(0, 1000, 100):
            sampler.extend(torch.arange(start, start + 100))
        assert storage.reads == 0  # boundaries are computed lazily
        sampler.sample(storage, 32)
        reads = storage.reads
        for _ in range(5):
            sampler.sample(storage, 32)
        assert storage.reads == reads

    def test_default_key_prefers_episode(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(10), sampler=SliceSampler(num_slices=1))
        rb.extend(
            TensorDict(
                {
                    "episode": torch.tensor([0, 0, 1, 1]),
                    ("next", "done"): torch.ones(4, 1, dtype=torch.bool),
                },
                [4],
            )
        )
        index, _ = rb._sampler.sample(rb._storage, 2)
        assert index.tolist() in ([0, 1], [2, 3])

    def test_default_key_falls_back_to_done(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(10), sampler=SliceSampler(num_slices=1))
        rb.extend(
            TensorDict({("next", "done"): torch.tensor([[False], [True], [False], [True]])}, [4])
        )
        index, info = rb._sampler.sample(rb._storage, 2)
        assert index.tolist() in ([0, 1], [2, 3])
        assert info["next", "truncated"].squeeze(-1).tolist() == [False, True]
        assert info["next", "done"].squeeze(-1).tolist() == [False, True]
        assert not info["next", "terminated"].any()  # no terminated entry is stored

    @pytest.mark.parametrize(
        "kwargs, missing", [({"traj_key": "traj"}, "'traj'"), ({}, r"\('next', 'done'\)")]
    )
    def test_missing_key_names_key_and_available_keys(self, kwargs, missing):
        rb = ReplayBuffer(
            storage=LazyTensorStorage(10), sampler=SliceSampler(num_slices=1, **kwargs)
        )
        with pytest.raises(KeyError, match=rf"{missing}.*Available keys: \['obs'\]"):
            rb.extend(TensorDict({"obs": torch.zeros(3)}, [3]))

    @pytest.mark.parametrize(
        "kwargs, entries, missing",
        [
            ({"traj_key": "traj"}, {"obs": torch.zeros(3)}, "'traj'"),
            ({}, {"obs": torch.zeros(3)}, r"\('next', 'done'\)"),
            ({"end_key": "end"}, {"end": torch.zeros(3)}, None),
            ({}, {"episode": torch.zeros(3)}, None),
        ],
    )
    def test_check_write_before_writing(self, kwargs, entries, missing):
        sampler = SliceSampler(num_slices=1, **kwargs)
        data = TensorDict(entries, [3])
        if missing is None:
            sampler._check_write(data)
            return
        with pytest.raises(KeyError, match=rf"{missing}.*Available keys: \['obs'\]"):
            sampler._check_write(data)

    def test_list_storage(self):
        rb = ReplayBuffer(
            storage=ListStorage(10), sampler=SliceSampler(num_slices=1, traj_key="ep")
        )
        rb.extend([TensorDict({"ep": torch.tensor(i // 3)}, []) for i in range(6)])
        index, _ = rb._sampler.sample(rb._storage, 3)
        assert index.tolist() in ([0, 1, 2], [3, 4, 5])

    @pytest.mark.parametrize("static", ["ends", "trajectories"])
    def test_static_boundaries(self, static, make_counting_storage):
        values = (
            torch.tensor([0, 0, 1, 1, 1])
            if static == "trajectories"
            else torch.tensor([0, 1, 0, 0, 1]).bool()
        )
        storage = make_counting_storage(TensorDict({}, [5]))
        sampler = SliceSampler(num_slices=1, **{static: values})
        for _ in range(20):
            index, _ = sampler.sample(storage, 2)
            assert index.tolist() in ([0, 1], [2, 3], [3, 4])
        assert storage.reads <= 1  # at most one look at the stored keys, never the boundaries

    def test_num_slices_sets_slice_count(self):
        rb = ReplayBuffer(
            storage=LazyTensorStorage(100), sampler=SliceSampler(num_slices=4, traj_key="ep")
        )
        rb.extend(TensorDict({"ep": torch.arange(100) // 25}, [100]))
        index, info = rb._sampler.sample(rb._storage, 40)
        assert index.view(4, 10).diff(dim=1).eq(1).all()
        assert info["next", "done"].view(4, 10)[:, -1].all()
        assert not info["next", "done"].view(4, 10)[:, :-1].any()

    def test_no_signals_without_truncated_key(self):
        rb = ReplayBuffer(
            storage=LazyTensorStorage(10),
            sampler=SliceSampler(num_slices=1, traj_key="ep", truncated_key=None),
        )
        rb.extend(TensorDict({"ep": torch.zeros(4)}, [4]))
        assert rb._sampler.sample(rb._storage, 2)[1] == {}

    def test_custom_truncated_key_names_siblings(self):
        rb = ReplayBuffer(
            storage=LazyTensorStorage(10),
            sampler=SliceSampler(num_slices=1, traj_key="ep", truncated_key="trunc"),
        )
        rb.extend(TensorDict({"ep": torch.zeros(4)}, [4]))
        assert set(rb._sampler.sample(rb._storage, 2)[1]) == {"trunc", "done", "terminated"}

    @pytest.mark.parametrize(
        "kwargs, match",
        [
            ({}, "exactly one of num_slices and slice_len"),
            ({"num_slices": 2, "slice_len": 2}, "exactly one of num_slices and slice_len"),
            ({"num_slices": 0}, "num_slices to be a positive int"),
            (
                {"num_slices": 1, "ends": torch.ones(2), "trajectories": torch.ones(2)},
                "at most one of ends",
            ),
        ],
    )
    def test_bad_arguments_raise(self, kwargs, match):
        with pytest.raises(ValueError, match=match):
            SliceSampler(**kwargs)

    def test_batch_size_not_multiple_raises(self):
        rb = ReplayBuffer(
            storage=LazyTensorStorage(10), sampler=SliceSampler(num_slices=3, traj_key="ep")
        )
        rb.extend(TensorDict({"ep": torch.zeros(9)}, [9]))
        with pytest.raises(ValueError, match="multiple of num_slices=3, got batch_size=8"):
            rb.sample(8)

    def test_empty_storage_raises(self):
        rb = ReplayBuffer(
            storage=LazyTensorStorage(10), sampler=SliceSampler(num_slices=1, traj_key="ep")
        )
        with pytest.raises(RuntimeError, match="empty storage"):
            rb._sampler.sample(rb._storage, 2)

    def test_empty_forgets_boundaries(self):
        rb = ReplayBuffer(
            storage=LazyTensorStorage(10), sampler=SliceSampler(num_slices=1, traj_key="ep")
        )
        rb.extend(TensorDict({"ep": torch.zeros(6)}, [6]))
        rb.empty()
        rb.extend(TensorDict({"ep": torch.tensor([1, 1, 2])}, [3]))
        for _ in range(10):
            assert rb._sampler.sample(rb._storage, 2)[0].tolist() == [0, 1]

    def test_compile_gives_same_slices(self):
        data = TensorDict({"ep": torch.arange(60) // 20}, [60])
        out = []
        for compile in (False, {"backend": "eager"}):
            rb = ReplayBuffer(
                storage=LazyTensorStorage(60),
                sampler=SliceSampler(num_slices=3, traj_key="ep", compile=compile),
            )
            rb.extend(data)
            torch.manual_seed(0)
            out.append(rb._sampler.sample(rb._storage, 12)[0])
        assert torch.equal(*out)

    @pytest.mark.parametrize("via", ["state_dict", "dumps"])
    def test_state_round_trip_gives_same_samples(self, via, tmp_path):
        def build():
            return ReplayBuffer(
                storage=LazyTensorStorage(50), sampler=SliceSampler(num_slices=2, traj_key="ep")
            )

        rb = build()
        rb.extend(TensorDict({"ep": torch.arange(70) // 7}, [70]))
        other = build()
        other.extend(
            TensorDict({"ep": torch.arange(70) // 7}, [70])
        )  # storage content for the index
        other._sampler._empty()
        if via == "dumps":
            rb._sampler.dumps(tmp_path)
            other._sampler.loads(tmp_path)
        else:
            other._sampler.load_state_dict(rb._sampler.state_dict())
        torch.manual_seed(3)
        expected = rb._sampler.sample(rb._storage, 8)[0]
        torch.manual_seed(3)
        assert torch.equal(other._sampler.sample(other._storage, 8)[0], expected)

    @pytest.mark.parametrize("cls", ["slice", "prioritized"])
    def test_in_place_write_updates_boundaries(self, cls):
        sampler = (
            SliceSampler(slice_len=5, traj_key="ep")
            if cls == "slice"
            else PrioritizedSliceSampler(10, 1.0, 1.0, slice_len=5, traj_key="ep")
        )
        rb = ReplayBuffer(storage=LazyTensorStorage(10), sampler=sampler)
        rb.extend(TensorDict({"ep": torch.zeros(10, dtype=torch.long)}, [10]))
        rb[5:] = TensorDict({"ep": torch.ones(5, dtype=torch.long)}, [5])
        starts = {rb._sampler.sample(rb._storage, 5)[0][0].item() for _ in range(60)}
        assert starts == {0, 5}
        rb[torch.tensor([2])] = TensorDict({"ep": torch.ones(1, dtype=torch.long)}, [1])
        starts = {rb._sampler.sample(rb._storage, 5)[0][0].item() for _ in range(20)}
        assert starts == {5}

    def test_concurrent_extend_and_sample(self, concurrently):
        capacity = 2000
        rb = ReplayBuffer(
            storage=LazyTensorStorage(capacity), sampler=SliceSampler(num_slices=4, traj_key="ep")
        )
        rb.extend(TensorDict({"ep": torch.arange(capacity) // 50}, [capacity]))
        sampler, storage = rb._sampler, rb._storage

        def write():
            for i in range(100):
                # straight to storage + sampler: only the sampler's own lock protects it
                rows = (torch.arange(50) + 50 * i) % capacity
                data = TensorDict({"ep": torch.full((50,), 1000 + i)}, [50])
                storage.set(rows, data, set_cursor=False)
                sampler.extend(rows)

        def read():
            index, _ = sampler.sample(storage, 40)
            assert bool((index.view(4, 10).diff(dim=1) % capacity == 1).all())

        assert concurrently(write, read) == []
        ep = storage._get_entry("ep")
        for _ in range(10):
            index, _ = sampler.sample(storage, 40)
            assert bool((ep[index].view(4, 10).diff(dim=1) == 0).all())

    @pytest.mark.cuda
    @pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
    @pytest.mark.parametrize("where", ["storage", "use_gpu"])
    def test_cuda(self, where):
        device = "cuda" if where == "storage" else "cpu"
        sampler = SliceSampler(num_slices=2, traj_key="ep", use_gpu=where == "use_gpu")
        rb = ReplayBuffer(storage=LazyTensorStorage(40, device=device), sampler=sampler)
        rb.extend(TensorDict({"ep": torch.arange(40) // 10}, [40], device=device))
        index, _ = rb._sampler.sample(rb._storage, 8)
        assert index.device.type == torch.device(device).type
        assert rb._sampler._index.device.type == "cuda"
        ep = rb._storage._get_entry("ep")[index].view(2, 4)
        assert bool((ep == ep[:, :1]).all())
