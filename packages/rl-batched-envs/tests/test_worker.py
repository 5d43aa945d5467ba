"""ParallelEnv reliability: worker errors, deaths, hangs, and clean teardown."""

from __future__ import annotations

import gc
import os
import signal
import threading
import time

import pytest
import torch

from rl_batched_envs import ParallelEnv
from rl_batched_envs._errors import (
    RemoteTraceback,
    WorkerDiedError,
    decode_exception,
    encode_exception,
)
from rl_batched_envs._parallel import DEFAULT_TIMEOUT
from rl_envs_core.testing import CountingEnv


class FailingEnv(CountingEnv):
    """Raises in ``_step`` or ``_reset`` when its ``fail_on`` says so."""

    def __init__(self, fail_on: str = "", **kwargs):
        super().__init__(**kwargs)
        self.fail_on = fail_on

    def _step(self, tensordict):
        if self.fail_on == "step":
            return 1 / 0
        return super()._step(tensordict)

    def _reset(self, tensordict=None, **kwargs):
        if self.fail_on == "reset":
            raise LookupError("no reset for you")
        return super()._reset(tensordict)


class SleepyEnv(CountingEnv):
    """Sleeps ``delay`` seconds in ``_step``."""

    def __init__(self, delay: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.delay = delay

    def _step(self, tensordict):
        time.sleep(self.delay)
        return super()._step(tensordict)


def _gone(pid: int) -> bool:
    return not os.path.exists(f"/proc/{pid}")


class TestParallelEnvFailures:
    """Worker indices are env indices here: one process per env (``num_envs_per_worker=1``)."""

    def test_step_error_keeps_type_worker_index_and_traceback(self):
        env = ParallelEnv(2, FailingEnv, [{}, {"fail_on": "step"}], num_envs_per_worker=1)
        td = env.reset()
        with pytest.raises(ZeroDivisionError) as info:
            env.rand_step(td)
        notes = "".join(info.value.__notes__)
        assert "ParallelEnv worker 1" in notes and "'step'" in notes
        assert isinstance(info.value.__cause__, RemoteTraceback)
        assert "return 1 / 0" in info.value.__cause__.text
        assert env.reset()["observation"].shape == torch.Size([2, 1])  # still usable
        env.close()

    def test_reset_error_keeps_type(self):
        with ParallelEnv(2, FailingEnv, {"fail_on": "reset"}) as env:
            with pytest.raises(LookupError, match="no reset for you") as info:
                env.reset()
            assert "worker 0" in "".join(info.value.__notes__)

    def test_factory_error_at_start_is_raised_and_cleans_up(self):
        def factory():
            raise OSError("cannot build")

        with pytest.raises(OSError, match="cannot build"):
            ParallelEnv(2, factory)

    def test_killed_worker_raises_typed_error_within_two_seconds(self):
        env = ParallelEnv(2, SleepyEnv, [{}, {"delay": 10.0}], num_envs_per_worker=1)
        td = env.rand_action(env.reset())
        pids = env.worker_pids()
        threading.Timer(0.3, os.kill, (pids[1], signal.SIGKILL)).start()
        start = time.monotonic()
        with pytest.raises(WorkerDiedError, match=r"worker 1 was killed by signal SIGKILL") as info:
            env.step(td)
        assert time.monotonic() - start < 2.3
        assert info.value.worker == 1 and info.value.exitcode == -signal.SIGKILL
        assert info.value.command == "step"
        assert "'step'" in str(info.value)
        assert env.is_closed
        assert all(_gone(pid) for pid in pids)
        env.close()

    def test_worker_killed_while_idle_is_reported_on_next_command(self):
        env = ParallelEnv(2, CountingEnv)
        pid = env.worker_pids()[0]
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
        with pytest.raises(WorkerDiedError, match="worker 0"):
            env.rand_step(env.reset())
        env.close()

    def test_hung_worker_hits_timeout(self):
        env = ParallelEnv(2, SleepyEnv, [{}, {"delay": 30.0}], timeout=0.5, num_envs_per_worker=1)
        td = env.rand_action(env.reset())
        pids = env.worker_pids()
        start = time.monotonic()
        with pytest.raises(TimeoutError, match=r"workers \[1\] did not answer 'step' within 0.5"):
            env.step(td)
        assert time.monotonic() - start < 3.0
        assert all(_gone(pid) for pid in pids)
        env.close()

    def test_default_timeout_is_documented_value(self):
        with ParallelEnv(1, CountingEnv) as env:
            assert env._timeout == DEFAULT_TIMEOUT == 120.0

    def test_close_stops_workers(self):
        env = ParallelEnv(3, CountingEnv)
        pids = env.worker_pids()
        env.close()
        assert env.worker_pids() == []
        assert all(_gone(pid) for pid in pids)

    def test_garbage_collection_of_unclosed_env_stops_workers(self):
        env = ParallelEnv(2, CountingEnv)
        env.rand_step(env.reset())
        pids = env.worker_pids()
        del env
        gc.collect()
        assert all(_gone(pid) for pid in pids)

    def test_context_manager_closes(self):
        with ParallelEnv(2, CountingEnv) as env:
            pids = env.worker_pids()
        assert env.is_closed and all(_gone(pid) for pid in pids)


class TestErrorTransport:
    def test_unpicklable_exception_falls_back_to_runtime_error_with_text(self):
        class Local(Exception):
            pass

        exc = decode_exception(encode_exception(Local("odd"), "tb"), "ParallelEnv", 3, "step")
        assert isinstance(exc, RuntimeError)
        assert "Local: odd" in str(exc)
        assert "worker 3" in exc.__notes__[0]

    @pytest.mark.parametrize(("code", "text"), [(-9, "SIGKILL"), (3, "exited with code 3")])
    def test_worker_died_error_describes_exit(self, code, text):
        err = WorkerDiedError("ParallelEnv", 2, code, "reset")
        assert text in str(err) and "worker 2" in str(err) and "'reset'" in str(err)


def _gone(pid: int) -> bool:
    """The process ended (a zombie left for whoever adopted it counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


_ABRUPT_PARENT = """
import multiprocessing, os, sys
from rl_envs_core.testing import CountingEnv
from rl_batched_envs import MultiSyncDataCollector, ParallelEnv
if sys.argv[1] == "env":
    env = ParallelEnv(2, CountingEnv, mp_start_method="fork")
    env.rollout(2)
else:
    collector = MultiSyncDataCollector([CountingEnv, CountingEnv], frames_per_batch=4, total_frames=-1)
    next(iter(collector))
print(" ".join(str(p.pid) for p in multiprocessing.active_children()), flush=True)
os._exit(0)  # no close(), no atexit: as if the parent were killed
"""


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads process states from /proc")
@pytest.mark.parametrize("what", ["env", "collector"])
def test_workers_end_when_their_parent_dies_without_closing(what):
    import subprocess
    import sys

    # Popen and one line: a worker that outlives the parent keeps the stdout pipe open
    with subprocess.Popen(
        [sys.executable, "-c", _ABRUPT_PARENT, what],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    ) as parent:
        line = parent.stdout.readline()
        assert parent.wait(timeout=120) == 0
    pids = [int(p) for p in line.split()]
    assert len(pids) == 2
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not all(_gone(p) for p in pids):
        time.sleep(0.1)
    left = [p for p in pids if not _gone(p)]
    for pid in left:  # leave no process behind, even when failing
        os.kill(pid, signal.SIGKILL)
    assert not left, f"workers {left} outlived their parent"


class _SlowCountingEnv(CountingEnv):
    """A counting env whose steps take long enough to be interrupted."""

    def _step(self, tensordict):
        time.sleep(0.6)
        return super()._step(tensordict)


class _Interrupted(Exception):
    pass


def _raise_interrupted(signum, frame):
    raise _Interrupted


@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="needs POSIX signals")
def test_a_step_interrupted_in_the_parent_does_not_shift_later_replies():
    # Ctrl-C in a notebook: the parent stops waiting, the workers finish the step anyway.
    # The next step must wait for that stale reply and read its own data, not the
    # buffers of a step still being written.
    env = ParallelEnv(2, _SlowCountingEnv)
    previous = signal.signal(signal.SIGUSR1, _raise_interrupted)
    try:
        td = env.rand_action(env.reset())
        first = env.step(td.clone())["next", "observation"]
        threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGUSR1)).start()
        with pytest.raises(_Interrupted):
            env.step(td.clone())
        after = [env.step(td.clone())["next", "observation"] for _ in range(2)]
    finally:
        signal.signal(signal.SIGUSR1, previous)
        env.close()
    assert (after[0] == first + 2).all()  # the interrupted step ran in the workers
    assert (after[1] == after[0] + 1).all()
