"""Which policies the collectors call on views of an in-place batch, and the fallbacks."""

from __future__ import annotations

import torch
from tensordict.nn import TensorDictModule

from rl_batched_envs import SyncDataCollector
from rl_batched_envs.collectors._in_place import PolicyOnViews
from rl_envs_core.extension import BufferedRollout
from rl_envs_core.testing import BufferedCountingEnv, CountingEnv

CARRIED = ["observation", "done", "terminated", "truncated"]


def _action(observation):
    return torch.ones((*observation.shape[:-1], 1), dtype=torch.long)


def test_a_tensordict_module_reading_root_entries_is_called_on_views():
    policy = TensorDictModule(_action, in_keys=["observation"], out_keys=["action"])
    plan = PolicyOnViews(CountingEnv(), policy, CARRIED)
    assert plan.kind == "module" and plan.outputs == ["action"]


def test_a_plain_callable_on_observations_is_called_on_views():
    plan = PolicyOnViews(CountingEnv(), lambda observation: _action(observation), CARRIED)
    assert plan.kind == "plain" and plan.inputs == ["observation"]


def test_policies_the_views_cannot_serve_keep_the_general_path():
    env = CountingEnv()
    writes_next = TensorDictModule(
        lambda o: (_action(o), o), in_keys=["observation"], out_keys=["action", ("next", "x")]
    )
    reads_reward = TensorDictModule(_action, in_keys=["reward"], out_keys=["action"])
    overwrites_obs = TensorDictModule(
        lambda o: (_action(o), o), in_keys=["observation"], out_keys=["action", "observation"]
    )
    for policy in (writes_next, reads_reward, overwrites_obs, lambda td: td):
        assert PolicyOnViews(env, policy, CARRIED).kind is None


def test_a_policy_writing_non_tensor_data_keeps_the_general_path():
    policy = TensorDictModule(_action, in_keys=["observation"], out_keys=["action"])
    plan = PolicyOnViews(CountingEnv(), policy, CARRIED)
    batch = CountingEnv().rollout(3, policy, break_when_any_done=False)
    batch.set_non_tensor("note", "hello")  # a root entry the views cannot hold
    plan.learn(batch)
    assert plan.kind is None and not plan.ready


def test_a_stepper_without_a_per_step_mode_keeps_the_general_path():
    # BufferedCountingEnv's stepper only fills whole batches of known actions
    env = BufferedCountingEnv(max_steps=4)
    policy = TensorDictModule(_action, in_keys=["observation"], out_keys=["action"])
    collector = SyncDataCollector(env, policy, frames_per_batch=6, total_frames=18)
    batches = [b.clone() for b in collector]
    reference = SyncDataCollector(
        CountingEnv(max_steps=4), policy, frames_per_batch=6, total_frames=18
    )
    for got, want in zip(batches, reference, strict=True):
        for key in want.keys(True, True):
            assert torch.equal(got.get(key), want.get(key)), key
    engine = BufferedRollout.of(env)
    assert engine is not None and collector._on_views.ready  # asked, and declined
    collector.shutdown()
    reference.shutdown()


class _Subclass(TensorDictModule):
    pass


def test_a_plain_tensordict_module_is_called_through_its_module_alone():
    plain = TensorDictModule(_action, in_keys=["observation"], out_keys=["action"])
    assert PolicyOnViews(CountingEnv(), plain, CARRIED).module is _action
    keyword = TensorDictModule(
        lambda observation: _action(observation),
        in_keys={"observation": "observation"},
        out_keys=["action"],
    )
    hooked = TensorDictModule(_action, in_keys=["observation"], out_keys=["action"])
    hooked.register_forward_hook(lambda module, args, out: out)
    subclass = _Subclass(_action, in_keys=["observation"], out_keys=["action"])
    for policy in (keyword, hooked, subclass):  # the wrapper does more: it is called
        assert PolicyOnViews(CountingEnv(), policy, CARRIED).module is None
