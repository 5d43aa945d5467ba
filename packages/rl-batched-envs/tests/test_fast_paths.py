"""The hot-path shortcuts give the data of the general path, and fall back to it."""

from __future__ import annotations

import warnings
from functools import partial

import pytest
import torch
from tensordict import TensorDict

import rl_batched_envs._layout as layout
from rl_batched_envs import ParallelEnv, SerialEnv
from rl_batched_envs._env_group import flat_entries
from rl_batched_envs._layout import worker_spans
from rl_batched_envs._stacking import clone_entries
from rl_envs_core.testing import CountingEnv, assert_close_nan
from rl_specs import Composite


class TerminatedOnlyEnv(CountingEnv):
    """Returns ``"terminated"`` without ``"done"`` (the batched env derives it)."""

    def _step(self, tensordict):
        return super()._step(tensordict).exclude("done")


class DoubleObsEnv(CountingEnv):
    """Returns a float64 observation for a float32 spec (cast on the way in)."""

    def _step(self, tensordict):
        out = super()._step(tensordict)
        out.set("observation", out.get("observation").double() + 0.25)
        return out


class ComplexObsEnv(CountingEnv):
    """A complex observation: it cannot be stacked into the float buffer, only copied."""

    def _step(self, tensordict):
        out = super()._step(tensordict)
        out.set("observation", out.get("observation").to(torch.complex64))
        return out


class BadShapeAtEnv(CountingEnv):
    """Env ``bad`` returns an observation of the wrong shape."""

    def __init__(self, bad: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.bad = bad

    def _step(self, tensordict):
        out = super()._step(tensordict)
        if self.bad:
            out.set("observation", torch.zeros(3))
        return out


class NestedActionEnv(CountingEnv):
    """An action under a nested key (inputs with a sub-tensordict)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.full_action_spec = Composite(
            agent=Composite(action=self.action_spec.clone()), shape=self.batch_size
        )


def _rollout(env, steps=7, general=False):
    if general:  # every output through the per-env copies: no output has a stackable shape
        group = env._groups[0]
        group.next_shapes = [None] * len(group.next_shapes)
    env.set_seed(0)
    torch.manual_seed(0)
    td, seen = env.reset(), []
    for _ in range(steps):
        data, td = env.step_and_maybe_reset(env.rand_action(td))
        seen.append(data.clone())
    return torch.stack(seen, -1)


@pytest.mark.parametrize(
    "factory",
    [
        partial(CountingEnv, max_steps=3),
        partial(CountingEnv, max_steps=3, batch_size=[2]),
        partial(TerminatedOnlyEnv, max_steps=3),
        partial(DoubleObsEnv, max_steps=3),
        NestedActionEnv,
    ],
    ids=["counting", "sub-batch", "terminated-only", "float64", "nested-action"],
)
def test_stacked_step_matches_per_env_copies(factory):
    fast, general = SerialEnv(3, factory), SerialEnv(3, factory)
    assert_close_nan(_rollout(fast), _rollout(general, general=True))
    fast.close()
    general.close()


def test_stacked_step_takes_no_per_env_copy(monkeypatch):
    env = SerialEnv(3, partial(CountingEnv, max_steps=3))
    group = env._groups[0]
    writes = []
    original = group._write
    monkeypatch.setattr(group, "_write", lambda *a: writes.append(a[3]) or original(*a))
    _rollout(env)
    assert "step" not in writes and "reset" in writes
    env.close()


def test_unstackable_output_falls_back_to_copies():
    fast, general = SerialEnv(2, ComplexObsEnv), SerialEnv(2, ComplexObsEnv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # complex -> float discards the imaginary part
        assert_close_nan(_rollout(fast), _rollout(general, general=True))
    fast.close()
    general.close()


def test_bad_shape_is_raised_before_the_next_env_steps():
    env = SerialEnv(3, BadShapeAtEnv, [{}, {"bad": True}, {}])
    # the sub-env's own first-step check names the key and shapes; the note, the env
    with pytest.raises(ValueError, match=r"'observation'.*\(3,\).*\(1,\)(.|\n)*env 1"):
        env.rand_step(env.reset())
    assert env.count == [torch.ones(1), torch.ones(1), torch.zeros(1)]
    env.close()


def test_step_input_is_a_fresh_tensordict_over_the_buffer():
    for factory in (CountingEnv, NestedActionEnv):
        env = SerialEnv(2, factory)
        group = env._groups[0]
        view = group.in_td[1]
        fresh = group._input(1, False)
        assert fresh is not view
        previous = group.previous[1]  # the observations of the previous step
        expected = {*view.keys(True, True), *previous.keys(True, True)}
        assert set(fresh.keys(True, True)) == expected and len(previous.keys(True, True))
        assert fresh.batch_size == view.batch_size and fresh.device == view.device
        for source in (view, previous):
            for key in source.keys(True, True):
                assert fresh.get(key).data_ptr() == source.get(key).data_ptr()
        fresh.set("extra", torch.zeros(()))  # an env adding entries leaves the view alone
        assert "extra" not in view.keys()
        assert (group.in_src[1] is None) == (factory is NestedActionEnv)
        env.close()


def test_clone_entries_is_clone():
    flat = TensorDict(a=torch.arange(3.0), b=torch.zeros(3, 2, dtype=torch.bool), batch_size=[3])
    entries = flat_entries(flat)
    copy = clone_entries(flat, entries)
    assert_close_nan(copy, flat.clone())
    assert copy.get("a").data_ptr() != flat.get("a").data_ptr()
    nested = TensorDict(a=torch.zeros(3), sub=TensorDict(b=torch.ones(3), batch_size=[3]))
    nested.batch_size = [3]
    assert flat_entries(nested) is None
    assert_close_nan(clone_entries(nested, None), nested)


@pytest.mark.parametrize(
    ("n", "per_worker", "cpus", "spans"),
    [
        (8, None, 2, [(0, 4), (4, 8)]),
        (7, None, 3, [(0, 3), (3, 5), (5, 7)]),
        (3, None, 8, [(0, 1), (1, 2), (2, 3)]),
        (5, 1, 2, [(i, i + 1) for i in range(5)]),
        (5, 4, 2, [(0, 4), (4, 5)]),
    ],
)
def test_worker_spans(n, per_worker, cpus, spans):
    assert worker_spans(n, per_worker, cpus) == spans


def test_default_layout_fills_the_cpus_and_keeps_the_data(monkeypatch, seeded_env):
    monkeypatch.setattr(layout, "usable_cpus", lambda: 2)
    with ParallelEnv(5, seeded_env) as env:
        assert len(env.worker_pids()) == 2
        env.set_seed(3)
        torch.manual_seed(0)
        data = env.rollout(4, break_when_any_done=False)
    with ParallelEnv(5, seeded_env, num_envs_per_worker=1) as env:
        assert len(env.worker_pids()) == 5
    with SerialEnv(5, seeded_env) as ref:
        ref.set_seed(3)
        torch.manual_seed(0)
        assert_close_nan(data, ref.rollout(4, break_when_any_done=False))


@pytest.mark.parametrize("use_buffers", [True, False])
@pytest.mark.parametrize("step_mask", [None, [True, False]])
def test_sub_env_step_equals_envbase_step(use_buffers, step_mask):
    # one step path: a sub-env's "next" is what EnvBase.step gives, done completion
    # ("done" from "terminated") and partial steps included, buffers or not
    batched = SerialEnv(2, partial(TerminatedOnlyEnv, max_steps=2), use_buffers=use_buffers)
    single = TerminatedOnlyEnv(max_steps=2)
    td, ref = batched.reset(), single.reset()
    for _ in range(2):
        td = batched.rand_action(td)
        ref.set("action", td.get("action")[0].clone())
        if step_mask is not None:
            td.set("_step", torch.tensor(step_mask))
        got, want = batched.step(td)["next"][0], single.step(ref)["next"]
        assert sorted(got.keys()) == sorted(want.keys())
        assert_close_nan(got, want)
        td, ref = td.get("next").clone(), want.clone()
    batched.close()
