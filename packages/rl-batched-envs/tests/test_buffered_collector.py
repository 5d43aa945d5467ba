"""The collectors' in-place fast path gives the general path's batches, bit for bit.

``BufferedCountingEnv`` steps straight into the preallocated batch (the
``buffered_stepper`` hook); ``CountingEnv`` has the same dynamics without it. On
the same seed, every batch (traj ids included) must be equal.
"""

from __future__ import annotations

from functools import partial

import pytest
import torch

from rl_batched_envs import MultiSyncDataCollector, SyncDataCollector
from rl_envs_core.testing import BufferedCountingEnv, CountingEnv

BATCHES = [(), (3,)]


def assert_same(a, b) -> None:
    assert a.batch_size == b.batch_size
    assert a.names == b.names
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    for key in b.keys(True, True):
        x, y = a.get(key), b.get(key)
        assert x.dtype == y.dtype and x.shape == y.shape, key
        assert torch.equal(x, y), key


def _collect(env, n_batches=4, seed=0, **kwargs):
    kwargs.setdefault("frames_per_batch", 12 if not env.batch_size else 24)
    collector = SyncDataCollector(env, kwargs.pop("policy", None), total_frames=-1, **kwargs)
    torch.manual_seed(seed)
    batches = []
    for batch in collector:
        batches.append(batch.clone())
        if len(batches) == n_batches:
            break
    collector.shutdown()
    return batches


def _compare(batch_size, max_steps=4, **kwargs):
    fast = BufferedCountingEnv(max_steps=max_steps, batch_size=batch_size)
    slow = CountingEnv(max_steps=max_steps, batch_size=batch_size)
    if kwargs.get("set_truncated"):  # the option marks an entry the envs must declare
        fast, slow = fast.add_truncated_keys(), slow.add_truncated_keys()
    got = _collect(fast, **kwargs)
    want = _collect(slow, **kwargs)
    for a, b in zip(got, want, strict=True):
        assert_same(a, b)
    return fast, got


@pytest.mark.parametrize("batch_size", BATCHES)
def test_random_batches_are_bit_equal_to_the_general_path(batch_size):
    fast, got = _compare(batch_size)
    assert fast.buffered_batches == 3  # the first batch runs the env's checks
    ids = torch.cat([b["collector", "traj_ids"].reshape(-1) for b in got])
    assert ids.unique().numel() > 3


@pytest.mark.parametrize("batch_size", BATCHES)
def test_episodes_ending_on_the_last_step_carry_new_ids(batch_size):
    # 12 (or 24 / 3) steps per batch, episodes of 4 steps: each batch ends with a done
    _, got = _compare(batch_size, max_steps=4)
    last = got[1]["collector", "traj_ids"][..., -1]
    first = got[2]["collector", "traj_ids"][..., 0]
    assert bool((first > last).all())


@pytest.mark.parametrize(
    "options",
    [
        {"reset_at_each_iter": True},
        {"split_trajs": True},
        {"set_truncated": True},
        {"track_traj_ids": False},
        {"postproc": lambda batch: batch.set("seen", torch.ones(batch.shape))},
    ],
    ids=["reset_at_each_iter", "split_trajs", "set_truncated", "no_ids", "postproc"],
)
def test_collector_options_apply_to_fast_batches(options):
    fast, got = _compare((2,), max_steps=3, **options)
    assert fast.buffered_batches > 0
    if "postproc" in options:
        assert all("seen" in batch.keys() for batch in got)


def test_random_frames_then_a_policy_switch_paths_and_agree():
    def policy(td):
        return td.set("action", torch.ones_like(td["observation"], dtype=torch.int64))

    fast, _ = _compare((2,), policy=policy, init_random_frames=48, n_batches=4)
    assert fast.buffered_batches == 1  # batch 2 (batch 1 checks the env, 3 and 4 use the policy)


def test_max_frames_per_traj_takes_the_general_path():
    fast, _ = _compare((2,), max_steps=10, max_frames_per_traj=3)
    assert fast.buffered_batches == 0


def test_a_declining_env_is_collected_by_the_general_path():
    env = BufferedCountingEnv(max_steps=3, batch_size=(2,))
    env.decline = True
    got = _collect(env)
    want = _collect(CountingEnv(max_steps=3, batch_size=(2,)))
    for a, b in zip(got, want, strict=True):
        assert_same(a, b)


def test_worker_batches_are_written_into_shared_memory_in_place():
    make = partial(BufferedCountingEnv, max_steps=3, batch_size=(2,))
    collector = MultiSyncDataCollector(
        [make, make], None, frames_per_batch=24, total_frames=96, cat_results="stack"
    )
    batches = list(collector)
    collector.shutdown()
    assert len(batches) == 4
    for batch in batches:
        obs, nxt = batch["observation"], batch["next", "observation"]
        done = batch["next", "done"].squeeze(-1)
        same = ~done[..., :-1]
        assert torch.equal(obs[..., 1:, :][same], nxt[..., :-1, :][same])
        assert bool((obs[..., 1:, :][~same] == 0).all())
        ids = batch["collector", "traj_ids"].reshape(-1, batch.shape[-1])
        rows = [set(row.tolist()) for row in ids]  # one row per env, all workers
        assert all(not (a & b) for i, a in enumerate(rows) for b in rows[i + 1 :])


@pytest.mark.parametrize("cls", ["SerialEnv", "ParallelEnv"])
def test_batched_envs_step_in_place_through_their_sub_envs(cls):
    import rl_batched_envs

    batched = getattr(rl_batched_envs, cls)
    fast = batched(3, partial(BufferedCountingEnv, max_steps=4))
    slow = batched(3, partial(CountingEnv, max_steps=4))
    got = _collect(fast, frames_per_batch=30)
    want = _collect(slow, frames_per_batch=30)
    for a, b in zip(got, want, strict=True):
        assert_same(a, b)
    assert fast.buffered_batches == [3, 3, 3]  # every sub-env, every batch after the first
    fast.close()
    slow.close()


@pytest.mark.parametrize("cls", ["SerialEnv", "ParallelEnv"])
def test_batched_env_rollouts_step_in_place_too(cls):
    import rl_batched_envs

    batched = getattr(rl_batched_envs, cls)
    results = []
    for make in (BufferedCountingEnv, CountingEnv):
        env = batched(2, partial(make, max_steps=3))
        torch.manual_seed(0)
        env.rollout(2, break_when_any_done=False)
        results.append(env.rollout(8, break_when_any_done=False))
        if make is BufferedCountingEnv:
            assert env.buffered_batches == [1, 1]
        env.close()
    assert_same(*results)


def test_a_batched_env_with_one_declining_sub_env_takes_the_general_path():
    from rl_batched_envs import SerialEnv

    env = SerialEnv(2, [partial(BufferedCountingEnv, max_steps=3), CountingEnv])
    got = _collect(env, frames_per_batch=12)
    want = _collect(
        SerialEnv(2, [partial(CountingEnv, max_steps=3), CountingEnv]), frames_per_batch=12
    )
    for a, b in zip(got, want, strict=True):
        assert_same(a, b)


def test_a_restarted_parallel_env_shares_its_in_place_batch_again():
    from rl_batched_envs import ParallelEnv

    env = ParallelEnv(2, partial(BufferedCountingEnv, max_steps=3))
    first = _collect(env, n_batches=2, frames_per_batch=12)
    env.close()
    env.start()
    again = _collect(env, n_batches=2, frames_per_batch=12)
    assert again[1]["next", "observation"].shape == first[1]["next", "observation"].shape
    assert env.buffered_batches == [1, 1]  # the new workers stepped in place too
    env.close()
