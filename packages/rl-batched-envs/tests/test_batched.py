"""Behaviour shared by SerialEnv and ParallelEnv (each test runs on both)."""

from __future__ import annotations

from functools import partial

import pytest
import torch
from tensordict import LazyStackedTensorDict

from rl_batched_envs import ParallelEnv, SerialEnv
from rl_envs_core import PendulumEnv, check_env_specs
from rl_envs_core.testing import CountingEnv, EnvContract, assert_close_nan
from rl_specs import Composite, Unbounded


class WideCountingEnv(CountingEnv):
    """A counting env whose observation has 3 elements (other specs than CountingEnv)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.observation_spec = Composite(observation=Unbounded(shape=(3,)))

    def _output(self, done):
        out = super()._output(done)
        out.set("observation", out.get("observation").expand(3).clone())
        return out


class DynamicEnv(CountingEnv):
    """A counting env whose observation spec has a dynamic (-1) dim."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.observation_spec = Composite(observation=Unbounded(shape=(-1,)))


class ThreadsEnv(CountingEnv):
    def torch_threads(self):
        return torch.get_num_threads()


class BatchedBehaviour:
    """Tests run on every batched env class (``env_cls``)."""

    env_cls: type

    def make(self, *args, **kwargs):
        return self.env_cls(*args, **kwargs)

    def test_batch_size_prepends_num_workers(self):
        with self.make(3, partial(CountingEnv, batch_size=[2])) as env:
            assert env.batch_size == torch.Size([3, 2])
            assert env.action_spec.shape == torch.Size([3, 2, 1])
            assert env.full_done_spec["done"].shape == torch.Size([3, 2, 1])
            assert env.reset()["observation"].shape == torch.Size([3, 2, 1])

    def test_attributes_and_methods_are_forwarded(self, seeded_env):
        with self.make(4, seeded_env, [{"max_steps": m} for m in (1, 2, 3, 4)]) as env:
            a, b, c, d = env.max_steps
            assert (a, b, c, d) == (1, 2, 3, 4)
            assert env.ping(2) == [3, 3, 3, 3]
            with pytest.raises(AttributeError, match="no_such_attribute"):
                env.no_such_attribute

    def test_rollout_and_check_env_specs(self):
        with self.make(2, CountingEnv, {"max_steps": 3}) as env:
            check_env_specs(env)
            data = env.rollout(7, break_when_any_done=False)
        assert data.batch_size == torch.Size([2, 7])
        expected = torch.tensor([1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 1.0])
        assert torch.equal(data["next", "observation"][0].squeeze(-1), expected)

    def test_set_seed_matches_serial_env(self, seeded_env):
        runs = []
        for cls in (SerialEnv, self.env_cls):
            with cls(3, seeded_env) as env:
                seed = env.set_seed(7)
                torch.manual_seed(0)  # the random actions
                runs.append((seed, env.rollout(4, break_when_any_done=False)))
        assert runs[0][0] == runs[1][0] != 7
        assert_close_nan(runs[0][1], runs[1][1])
        first = runs[0][1]["observation"][:, 0]
        assert len(set(first.flatten().tolist())) == 3  # each worker got its own seed

    def test_partial_step_runs_only_masked_workers(self):
        with self.make(4, CountingEnv, {"max_steps": 10}) as env:
            td = env.rand_action(env.reset())
            td["_step"] = torch.tensor([True, False, True, False])
            out = env.step(td)["next", "observation"].squeeze(-1)
            assert out.tolist() == [1.0, 0.0, 1.0, 0.0]
            td = env.rand_action(env.reset())
            assert env.step(td)["next", "observation"].squeeze(-1).tolist() == [1.0] * 4

    def test_partial_step_within_sub_batch(self):
        with self.make(2, partial(CountingEnv, max_steps=10, batch_size=[2])) as env:
            td = env.rand_action(env.reset())
            td["_step"] = torch.tensor([[True, False], [False, False]])
            obs = env.step(td)["next", "observation"].squeeze(-1)
            assert obs.tolist() == [[1.0, 0.0], [0.0, 0.0]]

    @pytest.mark.parametrize("seed", [0, 1, 2])
    def test_random_partial_resets_match_one_big_env(self, seed):
        gen = torch.Generator().manual_seed(seed)
        ref = CountingEnv(max_steps=100, batch_size=[3, 2])
        with self.make(3, partial(CountingEnv, max_steps=100, batch_size=[2])) as env:
            td, td_ref = env.reset(), ref.reset()
            for _ in range(6):
                td = env.step(env.rand_action(td))
                td_ref = ref.step(ref.rand_action(td_ref))
                td, td_ref = env._step_mdp(td), ref._step_mdp(td_ref)
                mask = torch.rand(3, 2, 1, generator=gen) < 0.5  # mask shape == done shape
                td["_reset"], td_ref["_reset"] = mask, mask.clone()
                td, td_ref = env.reset(td), ref.reset(td_ref)
                assert "_reset" not in td.keys()
                assert torch.equal(td["observation"], td_ref["observation"])

    def test_reset_mask_of_wrong_shape_raises(self):
        with self.make(2, partial(CountingEnv, batch_size=[2])) as env:
            td = env.reset()
            td["_reset"] = torch.ones(2, 2, 2, dtype=torch.bool)
            with pytest.raises(ValueError, match=r"shape"):
                env.reset(td)
            td["_reset"] = torch.ones(2, 2, dtype=torch.bool)  # batch shape: reshaped
            assert env.reset(td)["observation"].shape == torch.Size([2, 2, 1])

    def test_nested_done_levels_reset(self, two_level_env):
        with self.make(2, two_level_env) as env:
            assert set(env.reset_keys) == {"_reset", ("agents", "_reset")}
            td = env.reset()
            for _ in range(2):
                td = env._step_mdp(env.step(env.rand_action(td)))
            assert td["agents", "done"].all()
            td["agents", "_reset"] = torch.tensor([[[True], [False]], [[False], [False]]])
            td = env.reset(td)
            assert td["agents", "obs"].squeeze(-1).tolist() == [[0.0, 2.0], [2.0, 2.0]]
            assert td["observation"].squeeze(-1).tolist() == [2.0, 2.0]
            td["_reset"] = torch.tensor([[False], [True]])
            td = env.reset(td)
            assert td["observation"].squeeze(-1).tolist() == [2.0, 0.0]
            assert td["agents", "obs"].squeeze(-1).tolist() == [[0.0, 2.0], [0.0, 0.0]]

    def test_step_and_maybe_reset_resets_done_workers(self):
        with self.make(2, CountingEnv, [{"max_steps": 2}, {"max_steps": 3}]) as env:
            td = env.reset()
            seen = []
            for _ in range(4):
                data, td = env.step_and_maybe_reset(env.rand_action(td))
                seen.append(
                    (
                        data["next", "observation"].squeeze(-1).tolist(),
                        td["observation"].squeeze(-1).tolist(),
                    )
                )
        assert seen == [
            ([1.0, 1.0], [1.0, 1.0]),
            ([2.0, 2.0], [0.0, 2.0]),
            ([1.0, 3.0], [1.0, 0.0]),
            ([2.0, 1.0], [0.0, 1.0]),
        ]

    def test_close_then_reuse_restarts(self):
        env = self.make(2, CountingEnv)
        env.close()
        assert env.is_closed
        assert env.reset()["observation"].shape == torch.Size([2, 1])
        assert not env.is_closed
        env.close()

    def test_update_kwargs_rebuilds_envs(self):
        env = self.make(2, CountingEnv, {"max_steps": 3})
        env.update_kwargs({"max_steps": 5})
        assert env.max_steps == [5, 5]
        env.update_kwargs([{"max_steps": 1}, {"max_steps": 2}])
        assert env.max_steps == [1, 2]
        env.close()

    def test_heterogeneous_factories_with_same_specs_stack_densely(self):
        fns = [partial(CountingEnv, max_steps=2), partial(CountingEnv, max_steps=4)]
        with self.make(2, fns) as env:
            data = env.rollout(4, break_when_any_done=False)
        assert not isinstance(data, LazyStackedTensorDict)
        assert data["next", "done"].squeeze(-1).tolist() == [
            [False, True, False, True],
            [False, False, False, True],
        ]

    def test_heterogeneous_specs_give_lazy_stacks(self):
        with self.make(2, [CountingEnv, WideCountingEnv]) as env:
            td = env.reset()
            assert isinstance(td, LazyStackedTensorDict)
            out = env.step(env.rand_action(td))
            assert out[1]["next", "observation"].tolist() == [1.0, 1.0, 1.0]
            assert out[0]["next", "observation"].tolist() == [1.0]

    def test_dynamic_specs_fall_back_to_pickled_transfer(self):
        with self.make(2, DynamicEnv) as env:
            assert env._use_buffers is False
            out = env.step(env.rand_action(env.reset()))
            assert out["next", "observation"].tolist() == [[1.0], [1.0]]

    @pytest.mark.parametrize("use_buffers", [True, False])
    def test_buffered_and_pickled_transfer_agree(self, use_buffers, seeded_env):
        with self.make(2, seeded_env, use_buffers=use_buffers) as env:
            env.set_seed(3)
            torch.manual_seed(0)
            data = env.rollout(5, break_when_any_done=False)
        with SerialEnv(2, seeded_env) as ref:
            ref.set_seed(3)
            torch.manual_seed(0)
            assert_close_nan(data, ref.rollout(5, break_when_any_done=False))

    def test_use_buffers_with_dynamic_specs_raises(self):
        with pytest.raises(ValueError, match="use_buffers=True"):
            self.make(2, DynamicEnv, use_buffers=True)

    def test_device_argument_sets_output_device(self):
        with self.make(2, partial(CountingEnv, device="cpu"), device="cpu") as env:
            assert env.device == torch.device("cpu")
            assert env.rand_step(env.reset())["next", "observation"].device.type == "cpu"
        with self.make(2, CountingEnv) as env:
            assert env.device is None

    @pytest.mark.cuda
    def test_cuda_device_moves_outputs_once(self):
        if not torch.cuda.is_available():
            pytest.skip("needs a CUDA device")
        with self.make(2, CountingEnv, device="cuda") as env:
            out = env.rand_step(env.reset())
            assert out["next", "observation"].device.type == "cuda"

    def test_pendulum_rollout(self):
        with self.make(2, PendulumEnv) as env:
            env.set_seed(0)
            check_env_specs(env)
            assert env.rollout(3)["next", "reward"].shape == torch.Size([2, 3, 1])

    @pytest.mark.parametrize(
        ("args", "error", "match"),
        [
            ((0, CountingEnv), ValueError, "positive int"),
            ((2, "CountingEnv"), TypeError, "callable"),
            ((2, [CountingEnv]), ValueError, "num_workers=2"),
            ((2, lambda: 3), TypeError, "must return an EnvBase"),
        ],
    )
    def test_bad_arguments_raise(self, args, error, match):
        with pytest.raises(error, match=match):
            self.make(*args)

    def test_different_sub_batch_sizes_raise(self):
        fns = [partial(CountingEnv, batch_size=[2]), partial(CountingEnv, batch_size=[3])]
        with pytest.raises(ValueError, match="one batch size"):
            self.make(2, fns)

    def test_output_not_matching_specs_names_env_key_and_shapes(self):
        class Liar(CountingEnv):
            def _step(self, tensordict):
                out = super()._step(tensordict)
                if int(self.count.sum()) == 2:  # a valid first step, then a bad one
                    out.set("observation", torch.zeros(4))
                return out

        with self.make(2, Liar) as env:
            td = env._step_mdp(env.rand_step(env.reset()))
            with pytest.raises(ValueError, match=r"env 0.*'observation'.*\(4,\).*\(1,\)") as info:
                env.rand_step(td)
        assert "check_env_specs" in str(info.value)

    def test_sub_env_error_names_the_env(self):
        class Broken(CountingEnv):
            def _step(self, tensordict):
                raise KeyError("boom")

        with self.make(2, Broken) as env:
            with pytest.raises(KeyError, match="boom") as info:
                env.rand_step(env.reset())
        assert "env 0" in "".join(info.value.__notes__)


class TestSerialEnv(BatchedBehaviour):
    env_cls = SerialEnv

    def test_repr_names_the_class(self):
        env = SerialEnv(2, CountingEnv)
        assert repr(env).startswith("SerialEnv(num_workers=2")


class TestSerialEnvContract(EnvContract):
    def make_env(self):
        return SerialEnv(2, PendulumEnv)


class TestParallelEnvContract(EnvContract):
    def make_env(self):
        env = ParallelEnv(2, PendulumEnv)
        self._envs = [*getattr(self, "_envs", []), env]
        return env

    def teardown_method(self):
        for env in getattr(self, "_envs", []):
            env.close()


class TestParallelEnv(BatchedBehaviour):
    env_cls = ParallelEnv

    @pytest.mark.parametrize("per_worker", [2, 3])
    def test_num_envs_per_worker_gives_same_data(self, per_worker, seeded_env):
        with ParallelEnv(5, seeded_env, num_envs_per_worker=per_worker) as env:
            assert len(env.worker_pids()) == -(-5 // per_worker)
            env.set_seed(1)
            torch.manual_seed(0)
            data = env.rollout(4, break_when_any_done=False)
        with SerialEnv(5, seeded_env) as ref:
            ref.set_seed(1)
            torch.manual_seed(0)
            assert_close_nan(data, ref.rollout(4, break_when_any_done=False))

    def test_workers_use_one_torch_thread(self):
        with ParallelEnv(2, ThreadsEnv) as env:
            assert env.torch_threads() == [1, 1]
        with ParallelEnv(1, ThreadsEnv, num_sub_threads=2) as env:
            assert env.torch_threads() == [2]

    def test_step_and_maybe_reset_never_resets_in_main_process(self):
        env = ParallelEnv(2, CountingEnv, {"max_steps": 2})
        td = env.reset()
        calls = []
        original = env._reset
        env._reset = lambda *a, **k: calls.append(1) or original(*a, **k)
        for _ in range(5):
            _, td = env.step_and_maybe_reset(env.rand_action(td))
        env.close()
        assert calls == []
        assert td["observation"].squeeze(-1).tolist() == [1.0, 1.0]

    def test_data_uses_shared_memory_buffers(self):
        with ParallelEnv(2, CountingEnv) as env:
            assert env._use_buffers
            assert env._next_buf.is_shared()
            out = env.rand_step(env.reset())
            assert not out["next", "observation"].is_shared()  # a copy, not the buffer

    @pytest.mark.parametrize("bad", [dict(mp_start_method="thread"), dict(num_envs_per_worker=0)])
    def test_bad_options_raise(self, bad):
        with pytest.raises(ValueError, match="must be"):
            ParallelEnv(2, CountingEnv, **bad)

    def test_spawn_with_unpicklable_factory_names_it(self):
        def local_factory():
            return CountingEnv()

        with pytest.raises(TypeError, match="local_factory"):
            ParallelEnv(1, local_factory, mp_start_method="spawn")

    def test_spawn_start_method_runs(self):
        with ParallelEnv(1, partial(CountingEnv, max_steps=2), mp_start_method="spawn") as env:
            assert env.mp_start_method == "spawn"
            obs = env.rollout(3, break_when_any_done=False)["next", "observation"]
        assert obs[0].squeeze(-1).tolist() == [1.0, 2.0, 1.0]


class TestTorchRLCallingConventions:
    def test_serial_env_accepts_and_ignores_mp_start_method(self):
        env = SerialEnv(2, CountingEnv, mp_start_method="spawn")
        try:
            assert env.rollout(2).batch_size == (2, 2)
        finally:
            env.close()

    def test_repeated_close_raises_unless_told_not_to(self):
        env = SerialEnv(2, CountingEnv)
        env.close()
        with pytest.raises(RuntimeError, match="raise_if_closed=False"):
            env.close()
        env.close(raise_if_closed=False)
        env.rollout(1)  # restarts on use
        env.close()


@pytest.mark.parametrize(
    "build",
    [
        lambda: SerialEnv(3, [CountingEnv, CountingEnv]),
        lambda: SerialEnv(3, CountingEnv, [{}, {}]),
        lambda: SerialEnv(2, CountingEnv).update_kwargs([{"max_steps": 3}]),
    ],
)
def test_per_worker_lists_of_the_wrong_length_raise_value_and_runtime_error(build):
    with pytest.raises(ValueError, match=r"and num_workers mismatch") as info:
        build()
    assert isinstance(info.value, RuntimeError)


@pytest.mark.parametrize("cls", [SerialEnv, ParallelEnv])
def test_a_partial_reset_without_buffers_leaves_earlier_steps_untouched(cls):
    # env 0 ends every 2 steps, env 1 every 50: the partial resets must not rewrite
    # the root data the rollout recorded for env 1 before them
    makers = [partial(CountingEnv, max_steps=2), partial(CountingEnv, max_steps=50)]
    with cls(2, makers, use_buffers=False, share_individual_td=True) as env:
        data = env.rollout(6, break_when_any_done=False)
    assert data[1]["observation"].flatten().tolist() == [0, 1, 2, 3, 4, 5]
    assert data[0]["observation"].flatten().tolist() == [0, 1, 0, 1, 0, 1]
