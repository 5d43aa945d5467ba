"""run_chunks: preprocess's worker processes (chunk indices in, a few integers out)."""

from __future__ import annotations

import multiprocessing
import os
import sys
import time

import pytest
import torch

from rl_datasets._chunk_workers import default_start_method, run_chunks


def _run(job, num_chunks, *, num_workers=2, method="fork", max_tasks=None, progress=None):
    return run_chunks(
        job,
        num_chunks,
        2,
        num_workers=num_workers,
        threads=1,
        mp_start_method=method,
        max_tasks_per_child=max_tasks,
        progress=progress or (lambda chunk: None),
    )


def _pid_job(chunk):
    return [chunk, os.getpid()]


def _slow_pid_job(chunk):
    time.sleep(0.002)
    return [chunk, os.getpid()]


class TestRunChunks:
    def test_every_chunk_runs_once_with_its_result_in_place(self):
        results = _run(_pid_job, 40)
        assert [chunk for chunk, _ in results] == list(range(40))

    def test_this_process_works_beside_its_workers(self):
        pids = {pid for _, pid in _run(_slow_pid_job, 100, num_workers=2)}
        assert os.getpid() in pids and len(pids) <= 2

    def test_progress_counts_every_chunk(self):
        seen = []
        _run(_pid_job, 12, progress=seen.append)
        assert len(seen) == 12
        assert {c for c in seen if c is not None} <= set(range(12))

    def test_max_tasks_per_child_replaces_workers_and_keeps_this_process_out(self):
        results = _run(_pid_job, 12, num_workers=2, max_tasks=2)
        pids = [pid for _, pid in results]
        assert os.getpid() not in pids
        assert all(pids.count(pid) <= 2 for pid in pids)
        assert len(set(pids)) >= 6

    def test_a_worker_exception_is_raised_here_with_its_traceback(self):
        parent = os.getpid()

        def fail_in_worker(chunk):
            if os.getpid() != parent:
                raise ArithmeticError(f"boom on {chunk}")
            return [chunk, 0]

        with pytest.raises(ArithmeticError, match="boom on") as info:
            _run(fail_in_worker, 8, max_tasks=8)
        notes = "".join(getattr(info.value, "__notes__", []))
        assert "worker process" in notes and "fail_in_worker" in notes

    def test_an_exception_here_stops_the_workers(self):
        parent = os.getpid()

        def fail_here(chunk):
            if os.getpid() == parent:
                raise KeyError("here")
            time.sleep(0.01)  # slow workers: the calling process surely claims a chunk
            return [chunk, 0]

        with pytest.raises(KeyError, match="here"):
            _run(fail_here, 1000)
        assert not [
            p for p in multiprocessing.active_children() if p.name.startswith("preprocess-worker")
        ]

    def test_a_worker_that_dies_is_a_clear_error(self):
        parent = os.getpid()

        def die(chunk):
            if os.getpid() != parent:
                os._exit(3)
            return [chunk, 0]

        with pytest.raises(RuntimeError, match="exited with code 3"):
            _run(die, 4, max_tasks=4)

    def test_an_exception_that_cannot_be_pickled_arrives_as_its_text(self):
        parent = os.getpid()

        class Odd(Exception):
            pass

        def fail(chunk):
            if os.getpid() != parent:
                raise Odd("local class")
            return [chunk, 0]

        with pytest.raises(RuntimeError, match="Odd: local class"):
            _run(fail, 4, max_tasks=4)


def test_default_start_method_is_fork_where_safe(monkeypatch):
    expected = "fork" if sys.platform.startswith("linux") else "spawn"
    assert default_start_method() == expected
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert default_start_method() == "spawn"


def test_no_more_workers_than_chunks(monkeypatch):
    ctx = multiprocessing.get_context("fork")
    started = []

    class Counted(ctx.Process):
        def start(self):
            started.append(self.name)
            super().start()

    monkeypatch.setattr(ctx, "Process", Counted)
    results = _run(_slow_pid_job, 1, num_workers=4, max_tasks=1)
    assert len(results) == 1 and results[0][1] != os.getpid()
    assert len(started) == 1
