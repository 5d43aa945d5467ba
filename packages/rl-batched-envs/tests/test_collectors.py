"""SyncDataCollector: batch layout, trajectory ids, policies, options and bad input."""

from __future__ import annotations

import itertools
from functools import partial

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from rl_batched_envs import (
    DataCollectorBase,
    SerialEnv,
    SyncDataCollector,
    split_trajectories,
)
from rl_envs_core import ExplorationType, PendulumEnv, RandomPolicy, exploration_type
from rl_envs_core.testing import CountingEnv


class FakeBuffer:
    """A replay-buffer stand-in: ``extend`` and a storage with ``max_size``/``ndim``."""

    def __init__(self, max_size: int = 1000, ndim: int = 1) -> None:
        self.storage = type("Storage", (), {"max_size": max_size, "ndim": ndim})()
        self.batches: list = []

    def extend(self, data):
        self.batches.append(data)


class ConstantAction(torch.nn.Module):
    """Writes ``bias`` (a buffer) as the action, whatever the observation."""

    def __init__(self, value: int = 0) -> None:
        super().__init__()
        self.register_buffer("bias", torch.tensor(value))

    def forward(self, observation):
        return torch.full(observation.shape, int(self.bias), dtype=torch.int64)


def constant_policy(value: int = 0) -> TensorDictModule:
    return TensorDictModule(ConstantAction(value), in_keys=["observation"], out_keys=["action"])


class TestSyncDataCollectorLayout:
    def test_batch_is_time_major_last_for_an_unbatched_env(self):
        collector = SyncDataCollector(
            CountingEnv(max_steps=3), None, frames_per_batch=5, total_frames=10
        )
        batches = list(collector)
        assert [b.batch_size for b in batches] == [torch.Size([5])] * 2
        assert batches[0].names == ["time"]
        assert batches[0]["observation"].squeeze(-1).tolist() == [0, 1, 2, 0, 1]
        assert batches[0]["next", "observation"].squeeze(-1).tolist() == [1, 2, 3, 1, 2]
        # the trajectory continues in the next batch
        assert batches[1]["observation"].squeeze(-1).tolist() == [2, 0, 1, 2, 0]
        assert batches[0]["next", "done"].squeeze(-1).tolist() == [False, False, True] + [False] * 2

    def test_batched_env_gives_env_dims_then_time(self):
        env = SerialEnv(2, partial(CountingEnv, max_steps=3))
        with SyncDataCollector(env, None, frames_per_batch=8, total_frames=8) as collector:
            (batch,) = list(collector)
        assert batch.batch_size == torch.Size([2, 4])
        assert batch.names == [None, "time"]
        assert batch["observation"].squeeze(-1).tolist() == [[0, 1, 2, 0]] * 2
        env.close()

    def test_traj_ids_are_unique_across_resets_and_envs(self):
        env = CountingEnv(max_steps=2, batch_size=[3])
        collector = SyncDataCollector(env, None, frames_per_batch=12, total_frames=24)
        ids = torch.cat([b["collector", "traj_ids"] for b in collector], -1)
        # every (env, run of steps) has its own id, never reused by another env
        owners = {}
        for env_index, row in enumerate(ids.tolist()):
            for value in row:
                assert owners.setdefault(value, env_index) == env_index
        assert ids[0].tolist() == [0, 0, 3, 3, 6, 6, 9, 9]

    def test_reset_at_each_iter_starts_new_trajectories(self):
        collector = SyncDataCollector(
            CountingEnv(max_steps=10),
            None,
            frames_per_batch=3,
            total_frames=6,
            reset_at_each_iter=True,
        )
        first, second = list(collector)
        assert second["observation"].squeeze(-1).tolist() == [0, 1, 2]
        assert second["collector", "traj_ids"].tolist() == [1, 1, 1]
        assert first["collector", "traj_ids"].tolist() == [0, 0, 0]

    def test_nested_keys_and_two_done_levels(self, two_level_env):
        collector = SyncDataCollector(two_level_env(max_steps=2), None, frames_per_batch=6)
        batch = collector.next()
        assert batch["next", "agents", "obs"].shape == torch.Size([6, 2, 1])
        # the root is done after 4 steps, then the env restarts from zero
        assert batch["observation"].squeeze(-1).tolist()[:5] == [0, 1, 2, 3, 0]
        collector.shutdown()

    def test_env_reusing_its_output_tensors_is_recorded_step_by_step(self):
        class ReusingEnv(CountingEnv):
            def _step(self, tensordict):
                out = super()._step(tensordict)
                buf = self.__dict__.setdefault("buf", torch.zeros(1))
                buf.copy_(out["observation"])
                out["observation"] = buf  # the same tensor at every step
                return out

        collector = SyncDataCollector(ReusingEnv(max_steps=50), None, frames_per_batch=4)
        collector.next()
        batch = collector.next()
        assert batch["next", "observation"].squeeze(-1).tolist() == [5, 6, 7, 8]


class TestSyncDataCollectorPolicies:
    def test_random_actions_follow_the_action_spec(self):
        env = PendulumEnv()
        batch = SyncDataCollector(env, None, frames_per_batch=50).next()
        assert env.action_spec.is_in(batch["action"])
        assert batch["action"].std() > 0

    @pytest.mark.parametrize("kind", ["module", "callable", "random_policy", "rand_step"])
    def test_policy_kinds(self, kind):
        env = CountingEnv(max_steps=100)
        policy = {
            "module": constant_policy(1),
            "callable": lambda observation: torch.ones_like(observation, dtype=torch.int64),
            "random_policy": RandomPolicy(env.action_spec),
            "rand_step": None,
        }[kind]
        if kind == "rand_step":
            policy = CountingEnv(max_steps=100).rand_step  # steps another env: still fine
        batch = SyncDataCollector(env, policy, frames_per_batch=4).next()
        assert batch["action"].shape == torch.Size([4, 1])
        if kind in ("module", "callable"):
            assert batch["action"].eq(1).all()

    def test_policy_is_called_under_the_exploration_type(self):
        seen = []

        def policy(td):
            seen.append(exploration_type())
            return td.set("action", torch.zeros(1, dtype=torch.int64))

        SyncDataCollector(
            CountingEnv(), policy, frames_per_batch=2, exploration_type=ExplorationType.MODE
        ).next()
        assert seen == [ExplorationType.MODE] * 2

    def test_init_random_frames_skip_the_policy(self):
        calls = []

        def policy(td):
            calls.append(1)
            return td.set("action", torch.zeros(1, dtype=torch.int64))

        collector = SyncDataCollector(
            CountingEnv(), policy, frames_per_batch=4, total_frames=12, init_random_frames=5
        )
        counts = []
        for _ in collector:
            counts.append(len(calls))
        assert collector.init_random_frames == 8
        assert counts == [0, 0, 4]

    def test_missing_action_key_names_key_expected_and_got(self):
        collector = SyncDataCollector(
            CountingEnv(), lambda td: td.set("act", torch.zeros(1)), frames_per_batch=2
        )
        with pytest.raises(KeyError, match=r"'action'.*shape \(1,\).*int64.*'act'"):
            collector.next()

    def test_wrong_action_shape_is_reported(self):
        policy = lambda td: td.set("action", torch.zeros(3, dtype=torch.int64))  # noqa: E731
        collector = SyncDataCollector(CountingEnv(), policy, frames_per_batch=2)
        with pytest.raises(ValueError, match=r"shape \(3,\).*expects \(1,\)"):
            collector.next()

    def test_wrong_action_dtype_is_reported(self):
        policy = lambda td: td.set("action", torch.zeros(1))  # noqa: E731
        collector = SyncDataCollector(CountingEnv(), policy, frames_per_batch=2)
        with pytest.raises(TypeError, match=r"float32.*expects torch.int64"):
            collector.next()

    def test_trust_policy_skips_the_check(self):
        policy = lambda td: td.set("action", torch.zeros(1))  # noqa: E731
        collector = SyncDataCollector(CountingEnv(), policy, frames_per_batch=2, trust_policy=True)
        assert collector.next()["action"].dtype == torch.float32

    def test_observation_callable_with_wrong_number_of_outputs(self):
        collector = SyncDataCollector(
            CountingEnv(), lambda observation: (observation, observation), frames_per_batch=2
        )
        with pytest.raises(ValueError, match="returned 2 value"):
            collector.next()

    def test_update_policy_weights_loads_given_weights(self):
        policy = constant_policy(0)
        collector = SyncDataCollector(CountingEnv(max_steps=100), policy, frames_per_batch=2)
        assert collector.next()["action"].eq(0).all()
        collector.update_policy_weights_(constant_policy(1).state_dict())
        assert collector.next()["action"].eq(1).all()
        collector.update_policy_weights_(TensorDict.from_module(constant_policy(0)))
        assert collector.next()["action"].eq(0).all()


class TestSyncDataCollectorOptions:
    def test_frames_per_batch_rounds_up_to_the_env_batch(self):
        env = CountingEnv(batch_size=[4])
        with pytest.warns(UserWarning, match="holds 12 frames"):
            collector = SyncDataCollector(env, None, frames_per_batch=10)
        assert collector.frames_per_batch == 12
        assert collector.next().batch_size == torch.Size([4, 3])

    @pytest.mark.parametrize("value", [0, -3, 2.5])
    def test_bad_frames_per_batch(self, value):
        with pytest.raises(ValueError, match="frames_per_batch"):
            SyncDataCollector(CountingEnv(), None, frames_per_batch=value)

    def test_bad_total_frames(self):
        with pytest.raises(ValueError, match="total_frames"):
            SyncDataCollector(CountingEnv(), None, frames_per_batch=2, total_frames=0)

    def test_endless_collector_runs_until_stopped(self):
        collector = SyncDataCollector(CountingEnv(), None, frames_per_batch=2, total_frames=-1)
        assert len(list(itertools.islice(collector, 7))) == 7
        with pytest.raises(RuntimeError, match="no length"):
            len(collector)

    def test_length_counts_batches(self):
        collector = SyncDataCollector(CountingEnv(), None, frames_per_batch=4, total_frames=10)
        assert len(collector) == 3
        assert len(list(collector)) == 3

    def test_postproc_is_applied_to_each_batch(self):
        def postproc(td):
            return td.set("seen", torch.ones(td.shape))

        collector = SyncDataCollector(
            CountingEnv(), None, frames_per_batch=2, total_frames=4, postproc=postproc
        )
        assert all(b["seen"].all() for b in collector)

    def test_replay_buffer_gets_the_batches_and_nothing_is_yielded(self):
        rb = FakeBuffer()
        collector = SyncDataCollector(
            CountingEnv(),
            None,
            frames_per_batch=3,
            total_frames=9,
            replay_buffer=rb,
            postproc=lambda td: td.set("p", torch.ones(td.shape)),
        )
        assert list(collector) == [None, None, None]
        assert [b.batch_size for b in rb.batches] == [torch.Size([3])] * 3
        assert rb.batches[0]["p"].all()

    def test_replay_buffer_too_small_for_a_batch(self):
        env = CountingEnv(batch_size=[2])
        collector = SyncDataCollector(
            env, None, frames_per_batch=8, replay_buffer=FakeBuffer(max_size=6, ndim=2)
        )
        with pytest.raises(ValueError, match=r"needs 8 elements.*max_size=6"):
            collector.next()

    def test_replay_buffer_without_extend(self):
        with pytest.raises(TypeError, match="extend"):
            SyncDataCollector(CountingEnv(), None, frames_per_batch=2, replay_buffer=object())

    def test_split_trajs_pads_each_trajectory(self):
        collector = SyncDataCollector(
            CountingEnv(max_steps=3), None, frames_per_batch=5, split_trajs=True
        )
        batch = collector.next()
        assert batch.batch_size == torch.Size([2, 3])
        assert batch["collector", "mask"].tolist() == [[True] * 3, [True, True, False]]
        assert batch["observation"].squeeze(-1).tolist() == [[0, 1, 2], [0, 1, 0]]

    def test_split_trajectories_needs_ids(self):
        with pytest.raises(KeyError, match="traj_ids"):
            split_trajectories(TensorDict({"a": torch.zeros(3)}, [3]))

    def test_max_frames_per_traj_truncates_and_resets(self):
        collector = SyncDataCollector(
            CountingEnv(max_steps=100, batch_size=[2]),
            None,
            frames_per_batch=10,
            max_frames_per_traj=2,
        )
        batch = collector.next()
        assert batch["observation"][0].squeeze(-1).tolist() == [0, 1, 0, 1, 0]
        assert batch["next", "truncated"][0].squeeze(-1).tolist() == [False, True] * 2 + [False]
        assert batch["next", "done"][0].squeeze(-1).tolist() == [False, True] * 2 + [False]
        assert batch["collector", "traj_ids"][0].tolist() == [0, 0, 2, 2, 4]

    def test_set_truncated_marks_the_last_step(self):
        env = CountingEnv(max_steps=100).add_truncated_keys()
        collector = SyncDataCollector(env, None, frames_per_batch=3, set_truncated=True)
        assert collector.next()["next", "truncated"].squeeze(-1).tolist() == [False, False, True]

    def test_set_truncated_without_a_truncated_entry_raises(self):
        collector = SyncDataCollector(
            CountingEnv(max_steps=100), None, frames_per_batch=3, set_truncated=True
        )
        with pytest.raises(RuntimeError, match="needs a 'truncated' entry"):
            collector.next()

    def test_set_seed_makes_collection_reproducible(self):
        def collect():
            collector = SyncDataCollector(PendulumEnv(), None, frames_per_batch=20)
            collector.set_seed(3)
            return collector.next()

        first, second = collect(), collect()
        assert torch.equal(first["action"], second["action"])
        assert torch.equal(first["next", "th"], second["next", "th"])

    def test_state_dict_round_trip_keeps_the_counters(self):
        policy = constant_policy(1)
        collector = SyncDataCollector(CountingEnv(), policy, frames_per_batch=2, total_frames=6)
        collector.next()
        state = collector.state_dict()
        other = SyncDataCollector(
            CountingEnv(), constant_policy(0), frames_per_batch=2, total_frames=6
        )
        other.load_state_dict(state)
        assert len(list(other)) == 2  # 2 of the 6 frames were already collected
        assert int(other.policy.module.bias) == 1

    def test_shutdown_closes_a_built_env_and_stops_collection(self):
        collector = SyncDataCollector(CountingEnv, None, frames_per_batch=2)
        env = collector.env
        collector.shutdown()
        assert env.is_closed
        with pytest.raises(RuntimeError, match="shut down"):
            collector.next()

    def test_create_env_fn_must_build_an_env(self):
        with pytest.raises(TypeError, match="not an EnvBase"):
            SyncDataCollector(lambda: 3, None, frames_per_batch=2)

    def test_is_a_data_collector_base(self):
        assert isinstance(SyncDataCollector(CountingEnv(), frames_per_batch=2), DataCollectorBase)


def logits_policy(td):
    """Action 0 and a ``"logits"`` entry the random actions do not write."""
    td.set("logits", torch.ones(2))
    return td.set("action", torch.zeros(1, dtype=torch.int64))


def test_policy_outputs_are_recorded_after_the_random_frames():
    collector = SyncDataCollector(
        CountingEnv(max_steps=100), logits_policy, frames_per_batch=3, init_random_frames=3
    )
    assert "logits" not in collector.next().keys()
    assert collector.next()["logits"].shape == torch.Size([3, 2])


def test_unknown_keyword_is_refused_and_torchrl_options_are_accepted():
    with pytest.raises(TypeError, match=r"unexpected keyword.*\['frames_per_bach'\]"):
        SyncDataCollector(CountingEnv(), None, frames_per_batch=2, frames_per_bach=3)
    SyncDataCollector(CountingEnv(), None, frames_per_batch=2, use_buffers=True, no_cuda_sync=True)


def test_rollout_into_a_batch_of_another_layout_returns_a_new_batch():
    """A caller's batch lacking an entry the steps write is left alone (no entry is dropped)."""
    collector = SyncDataCollector(
        CountingEnv(max_steps=100), logits_policy, frames_per_batch=3, init_random_frames=3
    )
    random_batch = collector.rollout()
    collector._frames += 3  # what iterating does: the random frames are over
    before = random_batch.clone()
    batch = collector.rollout(out=random_batch)
    assert batch is not random_batch
    assert batch["logits"].shape == torch.Size([3, 2])
    assert (random_batch == before).all()
    assert collector.rollout(out=batch) is batch  # the same layout: written in place


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
class TestSyncDataCollectorOnCuda:
    """The three device arguments put each part of the collection where they say."""

    def collect(self, **devices) -> TensorDict:
        collector = SyncDataCollector(
            partial(CountingEnv, max_steps=3),
            constant_policy(1),
            frames_per_batch=8,
            total_frames=8,
            **devices,
        )
        batch = next(iter(collector))
        collector.shutdown()
        return batch

    def test_storing_device_holds_the_batch_and_values_match_a_cpu_run(self):
        on_cuda = self.collect(storing_device="cuda")
        assert on_cuda["next", "observation"].device.type == "cuda"
        assert (on_cuda.cpu() == self.collect()).all()

    def test_policy_device_runs_the_policy_there_and_stores_on_the_env_device(self):
        batch = self.collect(policy_device="cuda", env_device="cpu", storing_device="cpu")
        assert batch["action"].device.type == "cpu"
        assert batch["action"].eq(1).all()

    def test_env_device_moves_the_env(self):
        batch = self.collect(device="cuda")
        assert batch["next", "observation"].device.type == "cuda"
        assert batch["collector", "traj_ids"].device.type == "cuda"
        assert (batch.cpu() == self.collect()).all()


def test_a_plain_policy_returning_more_values_than_action_keys_gets_a_clear_error():
    def two_values(observation):
        return observation.long(), observation

    collector = SyncDataCollector(CountingEnv(), two_values, frames_per_batch=4, total_frames=4)
    with pytest.raises(ValueError, match=r"returned 2 value\(s\) but the env has 1 action key"):
        next(iter(collector))
    collector.shutdown()
