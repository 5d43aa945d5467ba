"""RayCollector on a real local Ray cluster (``ray.init(address="local", num_cpus=2)``, one per module)."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys

import pytest
import torch
from tensordict import TensorDict

ray = pytest.importorskip("ray")

from rl_batched_envs import RayCollector  # noqa: E402
from rl_envs_core.testing import CountingEnv  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def cluster():
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


class _AddOffset(torch.nn.Module):
    """A policy whose action is a learnable constant (to see weight updates in the data)."""

    def __init__(self) -> None:
        super().__init__()
        self.offset = torch.nn.Parameter(torch.zeros(()), requires_grad=False)

    def forward(self, td):
        td["action"] = torch.ones(*td.batch_size, 1, dtype=torch.long) * self.offset.long()
        return td


class _ListBuffer:
    """A local (driver-side) buffer: anything with extend()."""

    def __init__(self) -> None:
        self.batches = []

    def extend(self, batch):
        self.batches.append(batch)


@pytest.fixture(scope="module")
def collector():
    """Two actors over CountingEnv(max_steps=3), shared by the tests that only read it."""
    col = RayCollector(
        functools.partial(CountingEnv, max_steps=3),
        _AddOffset(),
        num_collectors=2,
        frames_per_batch=8,
        total_frames=-1,
        remote_configs={"num_cpus": 0},  # lives through the module: leave the CPUs to the others
    )
    yield col
    col.shutdown()


class TestRayCollector:
    def test_sync_batches_stack_the_collectors(self, collector):
        batch = collector.next()
        assert batch.batch_size == torch.Size([2, 4])
        ids = batch["collector", "traj_ids"]
        assert set(ids[0].tolist()).isdisjoint(ids[1].tolist())  # ids never collide
        assert collector.frames_per_batch == 8

    def test_per_collector_frame_accounting(self, collector):
        before = list(collector.frames_per_collector)
        for _ in range(3):
            collector.next()
        after = collector.frames_per_collector
        assert [a - b for a, b in zip(after, before, strict=True)] == [12, 12]
        assert collector.stats()["frames_per_collector"] == after

    def test_weights_reach_every_actor(self, collector):
        policy = _AddOffset()
        policy.offset.data.fill_(1.0)
        collector.update_policy_weights_(policy)
        batch = collector.next()
        assert (batch["action"] == 1).all()
        collector.update_policy_weights_(TensorDict({"offset": torch.tensor(0.0)}))
        assert (collector.next()["action"] == 0).all()

    def test_async_yields_each_collectors_batch_and_shutdown_releases_the_actors(self):
        col = RayCollector(
            [CountingEnv, CountingEnv], frames_per_batch=4, total_frames=16, sync=False
        )
        ids = [actor._actor_id.hex() for actor in col._actors]
        try:
            batches = list(col)
            assert [b.batch_size for b in batches] == [torch.Size([4])] * 4
            assert sum(col.frames_per_collector) == 16
        finally:
            col.shutdown()
        col.shutdown()  # idempotent
        # ray._private.state is the only actor table reachable without the dashboard
        table = ray._private.state.actors()
        assert all(table[i]["State"] == "DEAD" for i in ids)

    def test_a_driver_side_buffer_gets_every_batch(self):
        rb = _ListBuffer()
        col = RayCollector(CountingEnv, frames_per_batch=4, total_frames=8, replay_buffer=rb)
        try:
            assert list(col) == [None, None]
            assert [b.batch_size for b in rb.batches] == [torch.Size([1, 4])] * 2
        finally:
            col.shutdown()

    def test_a_killed_actor_is_restarted_and_collection_goes_on(self):
        col = RayCollector(
            functools.partial(CountingEnv, max_steps=3),
            num_collectors=2,
            frames_per_batch=8,
            max_restarts=1,
        )
        try:
            first = col.next()
            pids = col.actor_pids()
            os.kill(pids[0], signal.SIGKILL)
            batch = col.next()  # waits for the restart, asks the batch again
            assert batch.batch_size == torch.Size([2, 4])
            assert col.stats()["restarts"] == [1, 0]
            assert col.actor_pids()[0] != pids[0]
            old = set(first["collector", "traj_ids"].flatten().tolist())
            assert old.isdisjoint(batch["collector", "traj_ids"][0].tolist())
        finally:
            col.shutdown()

    @pytest.mark.parametrize(
        "kwargs, error",
        [({"frames_per_batch": 0}, ValueError), ({"frames_per_batch": 4, "num_collectors": 0}, ValueError),
         ({"frames_per_batch": 4, "replay_buffer": object()}, TypeError),
         ({"frames_per_batch": 4, "max_restarts": -2}, ValueError)],
    )  # fmt: skip
    def test_bad_arguments(self, kwargs, error):
        with pytest.raises(error):
            RayCollector(CountingEnv, **kwargs)


def _broken_env():
    raise ValueError("no such level: 'ghost'")


class TestAConstructorThatFailsOnTheWorker:
    """An actor whose collector cannot be built is reported as such, and not restarted."""

    def test_the_factory_error_reaches_the_driver_at_once(self):
        import time

        start = time.monotonic()
        with pytest.raises(RuntimeError, match="failed while it was built") as info:
            RayCollector(_broken_env, frames_per_batch=4, max_restarts=3)
        assert "no such level: 'ghost'" in str(info.value)
        assert "OOM" not in str(info.value)  # it is no crash of the worker process
        assert time.monotonic() - start < 20  # no wait for restarts that would fail too

    def test_a_module_the_workers_cannot_import_names_the_fix(self, tmp_path, monkeypatch):
        (tmp_path / "driver_only_envs.py").write_text(
            "from rl_envs_core.testing import CountingEnv\n\ndef make():\n    return CountingEnv()\n"
        )
        monkeypatch.syspath_prepend(str(tmp_path))  # the driver sees it; Ray's workers do not
        import driver_only_envs

        with pytest.raises(RuntimeError, match="No module named 'driver_only_envs'") as info:
            RayCollector(driver_only_envs.make, frames_per_batch=4)
        assert "runtime_env" in str(info.value)


def test_more_cpus_than_the_cluster_has_is_refused_at_once():
    with pytest.raises(ValueError, match="CPU"):
        RayCollector(CountingEnv, num_collectors=3, frames_per_batch=4)


def test_without_ray_the_error_names_the_extra():
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "import rl_batched_envs\n"
        "try:\n    rl_batched_envs.RayCollector(None, frames_per_batch=1)\n"
        "except ImportError as err:\n    print(err)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'rl-batched-envs[ray]'" in out.stdout
