"""Multi-process collectors: gathering, weights, and failures (few, time-bounded tests)."""

from __future__ import annotations

import os
import signal
import time
from functools import partial

import pytest
import torch
from tensordict.nn import TensorDictModule

from rl_batched_envs import (
    MultiaSyncDataCollector,
    MultiCollector,
    MultiSyncDataCollector,
    aSyncDataCollector,
)
from rl_batched_envs._errors import WorkerDiedError
from rl_envs_core.testing import CountingEnv


class ConstantAction(torch.nn.Module):
    def __init__(self, value: int = 0) -> None:
        super().__init__()
        self.bias = torch.nn.Parameter(torch.tensor(float(value)))

    def forward(self, observation):
        return torch.full(observation.shape, int(self.bias.detach()), dtype=torch.int64)


class ExtraOutput(torch.nn.Module):
    """Action 0, and a second output the random actions do not have."""

    def forward(self, observation):
        return torch.zeros(observation.shape, dtype=torch.int64), observation * 2


class FailingEnv(CountingEnv):
    """Fails at its ``fail_at``-th step: ``how`` is raise, kill or hang."""

    def __init__(self, how: str, fail_at: int = 3) -> None:
        super().__init__(max_steps=100)
        self.how, self.fail_at, self.steps = how, fail_at, 0

    def _step(self, tensordict):
        self.steps += 1
        if self.steps == self.fail_at:
            if self.how == "raise":
                raise ArithmeticError("boom in the env")
            if self.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(60)
        return super()._step(tensordict)


MAKE = partial(CountingEnv, max_steps=3)


def _all_stopped(collector) -> bool:
    return collector.worker_pids() == []


class TestMultiSyncDataCollector:
    def test_batches_are_stacked_over_workers_with_distinct_traj_ids(self):
        with MultiSyncDataCollector(
            [MAKE, MAKE], None, frames_per_batch=10, total_frames=20
        ) as collector:
            batches = list(collector)
        assert [b.batch_size for b in batches] == [torch.Size([2, 5])] * 2
        ids = torch.stack(batches, -1)["collector", "traj_ids"]
        assert set(ids[0].flatten().tolist()).isdisjoint(ids[1].flatten().tolist())
        assert batches[1]["observation"][0].squeeze(-1).tolist() == [2, 0, 1, 2, 0]

    def test_cat_results_concatenates_and_postproc_runs_in_the_parent(self):
        env = partial(CountingEnv, batch_size=[2])
        with MultiSyncDataCollector(
            env,
            None,
            num_workers=2,
            frames_per_batch=8,
            total_frames=8,
            cat_results=0,
            postproc=lambda td: td.set("pid", torch.full(td.shape, os.getpid())),
        ) as collector:
            (batch,) = list(collector)
        assert batch.batch_size == torch.Size([4, 2])
        assert batch["pid"].eq(os.getpid()).all()

    def test_update_policy_weights_reaches_the_workers(self):
        policy = TensorDictModule(ConstantAction(0), in_keys=["observation"], out_keys=["action"])
        collector = MultiSyncDataCollector(
            [MAKE, MAKE], policy, frames_per_batch=4, total_frames=-1
        )
        try:
            assert collector.next()["action"].eq(0).all()
            with torch.no_grad():
                policy.module.bias.fill_(1.0)
            collector.update_policy_weights_()
            assert collector.next()["action"].eq(1).all()
        finally:
            collector.shutdown()
        assert _all_stopped(collector)

    def test_batches_handed_out_are_not_overwritten_by_later_ones(self):
        with MultiSyncDataCollector(
            [MAKE, MAKE], None, frames_per_batch=6, total_frames=-1
        ) as collector:
            kept = [collector.next() for _ in range(3)]
            copies = [b.clone() for b in kept]
            for _ in range(2):
                collector.next()
        for batch, copy in zip(kept, copies):
            assert (batch == copy).all()
        ids = [b["collector", "traj_ids"] for b in kept]
        assert ids[0].max() < ids[2].max()  # later batches did move on

    def test_cat_results_over_several_batches(self):
        env = partial(CountingEnv, batch_size=[2], max_steps=3)
        with MultiSyncDataCollector(
            env, None, num_workers=2, frames_per_batch=8, total_frames=24, cat_results=0
        ) as collector:
            batches = list(collector)
        assert [b.batch_size for b in batches] == [torch.Size([4, 2])] * 3
        obs = torch.cat([b["observation"] for b in batches], 1).squeeze(-1)
        assert obs[0].tolist() == [0, 1, 2, 0, 1, 2]  # each env runs on across batches
        ids = batches[2]["collector", "traj_ids"]
        assert set(ids[:2].flatten().tolist()).isdisjoint(ids[2:].flatten().tolist())

    @pytest.mark.parametrize("cls", [MultiSyncDataCollector, MultiaSyncDataCollector])
    def test_policy_entries_after_the_random_frames_reach_the_batches(self, cls):
        policy = TensorDictModule(
            ExtraOutput(), in_keys=["observation"], out_keys=["action", "doubled"]
        )
        with cls(
            [MAKE, MAKE], policy, frames_per_batch=8, total_frames=32, init_random_frames=8
        ) as collector:
            batches = list(collector)
        assert "doubled" not in batches[0].keys()  # every worker's first batch is random
        with_policy = [b for b in batches if "doubled" in b.keys()]
        assert len(with_policy) >= 2  # at most one random batch per worker
        for batch in with_policy:
            assert (batch["doubled"] == 2 * batch["observation"]).all()

    def test_multi_collector_dispatches_on_sync(self):
        with MultiCollector([MAKE], None, frames_per_batch=2, sync=True) as collector:
            assert isinstance(collector, MultiSyncDataCollector)
        with pytest.raises(TypeError, match="sync=True"):
            MultiCollector([MAKE], None, frames_per_batch=2)


class TestMultiaSyncDataCollector:
    def test_yields_worker_batches_as_they_come(self):
        with MultiaSyncDataCollector(
            [MAKE, MAKE], None, frames_per_batch=4, total_frames=16
        ) as collector:
            batches = list(collector)
            state = collector.state_dict()
        assert [b.batch_size for b in batches] == [torch.Size([4])] * 4
        assert state["collector"]["frames"] == 16
        ids = torch.cat([b["collector", "traj_ids"] for b in batches])
        assert {i % 2 for i in ids.tolist()} == {0, 1}  # both workers contributed

    def test_async_collector_collects_in_the_background(self):
        with aSyncDataCollector(MAKE, None, frames_per_batch=3, total_frames=6) as collector:
            batches = list(collector)
        assert [b["observation"].squeeze(-1).tolist() for b in batches] == [[0, 1, 2], [0, 1, 2]]


class TestCollectorWorkerFailures:
    def test_worker_exception_is_reraised_with_its_type_and_workers_stop(self):
        collector = MultiSyncDataCollector(
            [partial(FailingEnv, "raise"), MAKE], None, frames_per_batch=8
        )
        with pytest.raises(ArithmeticError, match="boom in the env") as info:
            collector.next()
        assert any("worker 0" in note for note in info.value.__notes__)
        assert _all_stopped(collector)
        with pytest.raises(RuntimeError, match="shut down"):
            collector.next()

    def test_worker_death_raises_worker_died_error(self):
        collector = MultiaSyncDataCollector([partial(FailingEnv, "kill")], None, frames_per_batch=8)
        with pytest.raises(WorkerDiedError, match="SIGKILL"):
            collector.next()
        assert _all_stopped(collector)

    def test_hanging_worker_times_out(self):
        collector = MultiSyncDataCollector(
            [partial(FailingEnv, "hang"), MAKE], None, frames_per_batch=8, timeout=1.0
        )
        start = time.monotonic()
        with pytest.raises(TimeoutError, match="did not answer"):
            collector.next()
        assert time.monotonic() - start < 10
        assert _all_stopped(collector)

    def test_bad_policy_output_in_a_worker_is_reported(self):
        policy = TensorDictModule(ConstantAction(0), in_keys=["observation"], out_keys=["act"])
        collector = aSyncDataCollector(MAKE, policy, frames_per_batch=2)
        with pytest.raises(KeyError, match="'action'"):
            collector.next()
        assert _all_stopped(collector)

    def test_failing_env_factory_fails_the_construction(self):
        def broken():
            raise OSError("no such env")

        with pytest.raises(OSError, match="no such env"):
            MultiSyncDataCollector([broken, MAKE], None, frames_per_batch=2)
