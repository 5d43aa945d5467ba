"""Constructor options of SerialEnv / ParallelEnv that TorchRL code passes."""

from __future__ import annotations

import os
import time
from functools import partial
from pathlib import Path

import pytest
import torch
from tensordict import LazyStackedTensorDict

from rl_batched_envs import ParallelEnv, SerialEnv
from rl_envs_core.testing import CountingEnv
from rl_specs import NonTensor, Unbounded


class TaggedEnv(CountingEnv):
    """A counting env whose data carries a string ``"tag"`` and which leaves a marker
    file when it is built and when it is closed."""

    def __init__(self, tag="t", marks=None, width=1, broken=False, slow_close=0.0, **kwargs):
        self.tag, self.marks, self.slow_close = tag, marks, slow_close
        self._mark("built")
        if broken:
            raise RuntimeError(f"env {tag} refuses to be built")
        super().__init__(**kwargs)
        spec = self.observation_spec.clone()
        spec["tag"] = NonTensor(shape=(), example_data=tag)
        spec["extra"] = Unbounded(shape=(width,))
        self.observation_spec = spec

    def _mark(self, what):
        if self.marks is not None:
            Path(self.marks, f"{what}-{self.tag}-{os.getpid()}").touch()

    def _with_tag(self, out):
        out.set_non_tensor("tag", self.tag)
        out.set("extra", torch.zeros(self.observation_spec["extra"].shape))
        return out

    def _reset(self, td=None, **kwargs):
        return self._with_tag(super()._reset(td, **kwargs))

    def _step(self, td):
        return self._with_tag(super()._step(td))

    def close(self, *, raise_if_closed=True):
        time.sleep(self.slow_close)
        self._mark("closed")
        super().close(raise_if_closed=raise_if_closed)


def marks(folder, what):
    return sorted(p.name.split("-")[1] for p in Path(folder).glob(f"{what}-*"))


@pytest.mark.parametrize("cls", [SerialEnv, ParallelEnv])
def test_non_tensor_entries_pass_through_by_value(cls):
    env = cls(2, TaggedEnv, [{"tag": "left"}, {"tag": "right"}])
    try:
        assert not env._use_buffers  # strings cannot live in tensor buffers
        assert list(env.reset()["tag"]) == ["left", "right"]
        data = env.rollout(3)
        assert [list(row) for row in data["next", "tag"]] == [["left"] * 3, ["right"] * 3]
    finally:
        env.close()


@pytest.mark.parametrize("cls", [SerialEnv, ParallelEnv])
def test_non_tensor_entries_pass_even_when_buffers_are_asked_for(cls):
    env = cls(2, TaggedEnv, [{"tag": "a"}, {"tag": "b"}], use_buffers=True)
    try:
        assert not env._use_buffers
        assert [list(r) for r in env.rollout(2)["next", "tag"]] == [["a", "a"], ["b", "b"]]
    finally:
        env.close()


def test_serial_for_single_builds_a_serial_env_for_one_worker_only():
    single = ParallelEnv(1, CountingEnv, serial_for_single=True, mp_start_method="fork")
    assert type(single) is SerialEnv
    assert single.rollout(2).batch_size == (1, 2)
    single.close()
    several = ParallelEnv(2, CountingEnv, serial_for_single=True, mp_start_method="fork")
    try:
        assert type(several) is ParallelEnv and several.mp_start_method == "fork"
    finally:
        several.close()
    SerialEnv(1, CountingEnv, serial_for_single=True).close()  # accepted, no effect


class TestMetadataFromWorkers:
    def test_the_workers_build_the_envs_and_data_is_pickled(self, tmp_path):
        kwargs = [{"tag": str(i), "marks": str(tmp_path)} for i in range(2)]
        env = ParallelEnv(2, TaggedEnv, kwargs, metadata_from_workers=True)
        try:
            assert env._use_buffers is False and not env.is_closed
            assert marks(tmp_path, "built") == ["0", "1"]
            assert not list(tmp_path.glob(f"built-*-{os.getpid()}"))  # not in this process
            assert list(env.reset()["tag"]) == ["0", "1"]
        finally:
            env.close()
        assert marks(tmp_path, "closed") == ["0", "1"]

    def test_use_buffers_true_is_refused(self):
        with pytest.raises(ValueError, match="requires use_buffers=False") as info:
            ParallelEnv(2, CountingEnv, metadata_from_workers=True, use_buffers=True)
        assert isinstance(info.value, RuntimeError)  # what TorchRL code catches

    def test_workers_with_other_tensor_layouts_are_refused_and_closed(self, tmp_path):
        kwargs = [{"tag": str(i), "marks": str(tmp_path), "width": i + 1} for i in range(2)]
        with pytest.raises(RuntimeError, match=r"metadata are incompatible.*extra"):
            ParallelEnv(2, TaggedEnv, kwargs, metadata_from_workers=True)
        assert marks(tmp_path, "closed") == ["0", "1"]
        # without the option, such envs are stacked lazily
        env = ParallelEnv(2, TaggedEnv, [{"width": 1}, {"width": 2}])
        try:
            assert isinstance(env.reset(), LazyStackedTensorDict)
        finally:
            env.close()


def test_a_worker_that_fails_to_build_its_env_closes_the_others(tmp_path):
    kwargs = [{"tag": "0", "marks": str(tmp_path)}, {"tag": "1", "broken": True}]
    with pytest.raises(RuntimeError, match="env 1 refuses to be built"):
        ParallelEnv(2, TaggedEnv, kwargs)
    assert marks(tmp_path, "closed") == ["0"]


def test_shutdown_timeout_bounds_a_slow_close():
    env = ParallelEnv(1, partial(TaggedEnv, slow_close=30.0), shutdown_timeout=0.2)
    pids = env.worker_pids()
    start = time.monotonic()
    env.close()
    assert time.monotonic() - start < 10.0
    for pid in pids:
        with pytest.raises(OSError):
            os.kill(pid, 0)


@pytest.mark.parametrize("cls", [SerialEnv, ParallelEnv])
def test_configure_parallel_only_while_closed(cls):
    env = cls(2, CountingEnv)
    with pytest.raises(RuntimeError, match="after the environment has started"):
        env.configure_parallel(num_sub_threads=1)
    env.close()
    assert env.configure_parallel(use_buffers=False, shutdown_timeout=1.0) is env
    try:
        assert env.rollout(2).batch_size == (2, 2)
        assert env._use_buffers is False
    finally:
        env.close()


@pytest.mark.parametrize("cls", [SerialEnv, ParallelEnv])
def test_share_individual_td(cls):
    env = cls(2, CountingEnv, share_individual_td=True)
    try:
        assert env.share_individual_td
        assert isinstance(env.reset(), LazyStackedTensorDict)
        assert env.rollout(2)["next", "observation"].shape == (2, 2, 1)
    finally:
        env.close()
    with pytest.raises(ValueError, match="use_buffers"):
        cls(2, CountingEnv, share_individual_td=True, use_buffers=True)
    with pytest.raises(ValueError, match="share_individual_td=False"):
        cls(2, [CountingEnv, partial(TaggedEnv, width=2)], share_individual_td=False)


def test_factories_and_kwargs_are_readable():
    env = SerialEnv(2, CountingEnv, {"max_steps": 3})
    assert env.create_env_fn == [CountingEnv, CountingEnv]
    assert env.create_env_kwargs == [{"max_steps": 3}, {"max_steps": 3}]
    env.close()


@pytest.mark.parametrize("cls", [SerialEnv, ParallelEnv])
def test_partial_steps_of_envs_with_non_tensor_entries(cls):
    env = cls(2, TaggedEnv, [{"tag": "a"}, {"tag": "b"}])
    try:
        td = env.rand_action(env.reset())
        td["_step"] = torch.tensor([True, False])  # env 1 keeps its example data
        out = env.step(td)["next"]
        assert list(out["tag"]) == ["a", "b"]
        assert out["observation"].squeeze(-1).tolist() == [1.0, 0.0]
    finally:
        env.close()


@pytest.mark.parametrize("cls", [SerialEnv, ParallelEnv])
def test_outputs_on_another_cpu_ordinal_are_writable_copies(cls):
    env = cls(2, partial(CountingEnv, device="cpu:0"), device="cpu:1")
    try:
        td = env.reset()
        assert td.device == torch.device("cpu:1") and not td.is_locked
        first = env.rand_step(td)
        env.rand_step(first["next"].clone())
        # the first step's data is not overwritten by the second one
        assert first["next", "observation"].squeeze(-1).tolist() == [1.0, 1.0]
        first["next", "observation"] += 1  # and can be edited
    finally:
        env.close()
