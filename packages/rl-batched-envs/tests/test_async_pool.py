"""AsyncEnvPool with the threading and multiprocessing backends."""

from __future__ import annotations

import os
import signal
import threading
import time
from functools import partial

import pytest
import torch
from tensordict import LazyStackedTensorDict

from rl_batched_envs import AsyncEnvPool, ProcessorAsyncEnvPool, ThreadingAsyncEnvPool
from rl_batched_envs._errors import WorkerDiedError
from rl_batched_envs._worker import DEFAULT_TIMEOUT
from rl_envs_core import PendulumEnv, check_env_specs
from rl_envs_core.testing import CountingEnv
from rl_specs import Composite, Unbounded

BACKENDS = ["threading", "multiprocessing"]


class WideEnv(CountingEnv):
    """A counting env with a 3-element observation and an extra entry."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.observation_spec = Composite(
            observation=Unbounded(shape=(3,)), extra=Unbounded(shape=(2,))
        )

    def _output(self, done):
        out = super()._output(done)
        out.set("observation", out.get("observation").expand(3).clone())
        out.set("extra", torch.zeros(2))
        return out


class BrokenEnv(CountingEnv):
    def _step(self, tensordict):
        raise ArithmeticError("broken step")


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


class TestAsyncEnvPool:
    @pytest.mark.parametrize(
        ("backend_name", "cls"),
        [("threading", ThreadingAsyncEnvPool), ("multiprocessing", ProcessorAsyncEnvPool)],
    )
    def test_backend_selects_the_implementation(self, backend_name, cls):
        env = AsyncEnvPool([CountingEnv], backend=backend_name)
        assert type(env) is cls and env.backend == backend_name
        env.close()

    def test_sync_reset_step_and_check_env_specs(self, backend):
        env = AsyncEnvPool([partial(CountingEnv, max_steps=3)] * 3, backend=backend)
        assert env.batch_size == torch.Size([3])
        check_env_specs(env)
        data = env.rollout(4, break_when_any_done=False)
        assert data["next", "observation"][:, -1].squeeze(-1).tolist() == [1.0, 1.0, 1.0]
        env.close()

    def test_pendulum_rand_step(self, backend):
        env = AsyncEnvPool([PendulumEnv, PendulumEnv], backend=backend)
        env.set_seed(0)
        out = env.rand_step(env.reset())
        assert out["next", "reward"].shape == torch.Size([2, 1])
        env.close()

    def test_async_step_with_env_index_entry(self, backend):
        env = AsyncEnvPool([CountingEnv, CountingEnv], backend=backend)
        s = env.rand_step(env.reset())
        s0 = env._step_mdp(s)[0]
        s0["env_index"] = 0
        env.async_step_send(s0)
        result = env.async_step_recv()
        assert result["env_index"].tolist() == [0]
        assert result["next", "observation"].tolist() == [[2.0]]
        env.close()

    def test_async_step_of_several_envs_with_min_get(self, backend):
        env = AsyncEnvPool([CountingEnv] * 3, backend=backend)
        td = env.rand_action(env.reset())
        env.async_step_send(td[[0, 2]], env_index=[0, 2])
        out = env.async_step_recv(min_get=2)
        assert sorted(out["env_index"].tolist()) == [0, 2]
        with pytest.raises(RuntimeError, match="Send them first"):
            env.async_step_recv()
        env.close()

    def test_async_reset_send_and_recv(self, backend):
        env = AsyncEnvPool([CountingEnv] * 2, backend=backend)
        env.async_reset_send()
        out = env.async_reset_recv(min_get=2)
        assert out["env_index"].tolist() == [0, 1]
        assert out["observation"].tolist() == [[0.0], [0.0]]
        env.close()

    def test_busy_env_refuses_a_second_command(self, backend):
        env = AsyncEnvPool([CountingEnv], backend=backend)
        td = env.rand_action(env.reset())[0]
        env.async_step_send(td, env_index=0)
        with pytest.raises(RuntimeError, match="still running a step"):
            env.async_step_send(td, env_index=0)
        env.async_step_recv()
        env.close()

    def test_seeding_waits_for_no_command_and_keeps_the_step(self, backend):
        env = AsyncEnvPool([CountingEnv, CountingEnv], backend=backend)
        td = env.rand_action(env.reset())
        env.async_step_send(td[1:], env_index=[1])
        with pytest.raises(RuntimeError, match=r"env 1 is still running a step.*async_step_recv"):
            env.set_seed(3)
        out = env.async_step_recv()  # the step in flight is neither lost nor mixed up
        assert out["env_index"].tolist() == [1]
        assert out["next", "observation"].tolist() == [[1.0]]
        env.set_seed(3)  # idle again: seeding works (raises otherwise)
        env.close()

    @pytest.mark.parametrize(
        ("env_index", "error", "match"),
        [(None, KeyError, "env_index"), (5, ValueError, r"\[0, 1\)")],
    )
    def test_bad_env_index_raises(self, env_index, error, match):
        env = AsyncEnvPool([CountingEnv])
        td = env.rand_action(env.reset())[0]
        with pytest.raises(error, match=match):
            env.async_step_send(td, env_index=env_index)
        env.close()

    @pytest.mark.parametrize("stack", ["lazy", "maybe_dense"])
    def test_different_specs_give_lazy_stacks(self, backend, stack):
        env = AsyncEnvPool(
            [WideEnv, partial(CountingEnv, max_steps=4)], stack=stack, backend=backend
        )
        reset = env.reset()
        assert isinstance(reset, LazyStackedTensorDict)
        s = env.rand_step(reset)
        assert s[0]["next", "observation"].tolist() == [1.0, 1.0, 1.0]
        assert s[1]["next", "observation"].tolist() == [1.0]
        env.close()

    def test_dense_stack_with_different_specs_raises(self):
        with pytest.raises(ValueError, match="stack='lazy'"):
            AsyncEnvPool([WideEnv, CountingEnv], stack="dense")

    def test_lazy_stack_of_same_specs(self):
        env = AsyncEnvPool([CountingEnv] * 2, stack="lazy")
        assert isinstance(env.reset(), LazyStackedTensorDict)
        env.close()

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [({"backend": "asyncio-ish"}, "backend must be"), ({"stack": "tall"}, "stack must be")],
    )
    def test_bad_options_raise(self, kwargs, match):
        with pytest.raises(ValueError, match=match):
            AsyncEnvPool([CountingEnv], **kwargs)

    def test_worker_error_propagates_with_env_index(self, backend):
        env = AsyncEnvPool([CountingEnv, BrokenEnv], backend=backend)
        with pytest.raises(ArithmeticError, match="broken step") as info:
            env.rand_step(env.reset())
        assert "1" in "".join(info.value.__notes__)
        env.close()

    def test_seed_example_runs(self, backend):
        # the documented example, with native envs in place of gym's (whose action
        # specs are of one class: rl-specs cannot stack Bounded with Categorical yet)
        env = AsyncEnvPool([CountingEnv, WideEnv], stack="lazy", backend=backend)
        reset = env.reset()
        s = env.rand_step(reset)
        s0 = s[0]
        s0["action"] = torch.ones(1, dtype=torch.int64)
        s0["env_index"] = 0
        env.async_step_send(s0)
        s0_result = env.async_step_recv()
        assert s0_result["env_index"].tolist() == [0]
        assert "next" in s0_result.keys()
        env.close()

    def test_create_env_kwargs_per_env(self):
        env = AsyncEnvPool(
            [CountingEnv, CountingEnv], create_env_kwargs=[{"max_steps": 1}, {"max_steps": 2}]
        )
        assert env.rand_step(env.reset())["next", "done"].squeeze(-1).tolist() == [True, False]
        env.close()
        with pytest.raises(ValueError, match="one dict per env maker"):
            AsyncEnvPool([CountingEnv], create_env_kwargs=[{}, {}])


_RELEASE = threading.Event()


class StuckEnv(CountingEnv):
    """Steps only once ``_RELEASE`` is set (threading backend) or after ``delay`` s."""

    def __init__(self, delay: float = 30.0, **kwargs):
        super().__init__(**kwargs)
        self.delay = delay

    def _step(self, tensordict):
        if threading.current_thread() is not threading.main_thread():
            _RELEASE.wait(self.delay)
        else:
            time.sleep(self.delay)
        return super()._step(tensordict)


def _stuck_in_process(**kwargs):
    env = StuckEnv(**kwargs)
    env._step = lambda td: (time.sleep(env.delay), CountingEnv._step(env, td))[1]
    return env


class TestAsyncEnvPoolNeverHangs:
    def test_default_timeout_is_parallel_envs(self, backend):
        env = AsyncEnvPool([CountingEnv], backend=backend)
        assert env.timeout == DEFAULT_TIMEOUT == 120.0
        env.close()

    @pytest.mark.parametrize("timeout", [0, -1.0])
    def test_bad_timeout_raises(self, timeout):
        with pytest.raises(ValueError, match="timeout must be a positive"):
            AsyncEnvPool([CountingEnv], timeout=timeout)

    def test_sub_env_error_leaves_the_pool_usable(self, backend):
        env = AsyncEnvPool([CountingEnv, BrokenEnv], backend=backend, timeout=10.0)
        td = env.rand_action(env.reset())
        with pytest.raises(ArithmeticError, match="broken step"):
            env.step(td)
        # every sub-env answered: reset works and the healthy env steps again
        out = env.reset()
        assert out["observation"].squeeze(-1).tolist() == [0.0, 0.0]
        env.async_step_send(env.rand_action(out)[0], env_index=0)
        assert env.async_step_recv()["next", "observation"].tolist() == [[1.0]]
        env.close()

    def test_async_error_then_reset_of_that_env(self, backend):
        env = AsyncEnvPool([CountingEnv, BrokenEnv], backend=backend, timeout=10.0)
        td = env.rand_action(env.reset())
        env.async_step_send(td[1], env_index=1)
        with pytest.raises(ArithmeticError, match="broken step") as info:
            env.async_step_recv()
        assert "1" in "".join(info.value.__notes__)
        env.async_reset_send(env_index=1)
        assert env.async_reset_recv()["env_index"].tolist() == [1]
        env.close()

    def test_stuck_threading_env_times_out_and_close_returns(self):
        _RELEASE.clear()
        env = AsyncEnvPool([CountingEnv, StuckEnv], backend="threading", timeout=0.5)
        td = env.rand_action(env.reset())
        start = time.monotonic()
        with pytest.raises(TimeoutError, match=r"envs \[1\] did not finish 'step' within 0.5"):
            env.step(td)
        assert time.monotonic() - start < 1.5  # not another timeout spent shutting down
        env.close()
        assert time.monotonic() - start < 2.0
        assert env.is_closed
        with pytest.raises(RuntimeError, match="shut down after a TimeoutError"):
            env.reset()
        env.close()  # idempotent
        _RELEASE.set()  # let the abandoned daemon thread end

    def test_close_of_threading_pool_with_a_stuck_command_returns(self):
        _RELEASE.clear()
        env = AsyncEnvPool([StuckEnv], backend="threading", timeout=0.5)
        env.async_step_send(env.rand_action(env.reset())[0], env_index=0)
        start = time.monotonic()
        env.close()
        assert time.monotonic() - start < 1.5
        _RELEASE.set()

    def test_hung_worker_process_times_out_and_is_stopped(self):
        env = AsyncEnvPool(
            [CountingEnv, partial(_stuck_in_process, delay=30.0)],
            backend="multiprocessing",
            timeout=0.5,
        )
        td = env.rand_action(env.reset())
        pids = env._pool.pids()
        start = time.monotonic()
        with pytest.raises(TimeoutError, match=r"workers \[1\] did not answer 'step' within 0.5"):
            env.step(td)
        assert time.monotonic() - start < 3.0
        assert all(not os.path.exists(f"/proc/{pid}") for pid in pids)
        with pytest.raises(RuntimeError, match="Build a new pool"):
            env.async_reset_send()
        env.close()

    def test_killed_worker_raises_and_pool_stays_closable(self):
        env = AsyncEnvPool([CountingEnv, CountingEnv], backend="multiprocessing", timeout=10.0)
        td = env.rand_action(env.reset())
        os.kill(env._pool.pids()[1], signal.SIGKILL)
        time.sleep(0.1)
        start = time.monotonic()
        with pytest.raises(WorkerDiedError, match="worker 1 was killed by signal SIGKILL"):
            env.step(td)
        assert time.monotonic() - start < 3.0
        with pytest.raises(RuntimeError, match="shut down after a WorkerDiedError"):
            env.reset()
        env.close()
        assert env.is_closed
