"""Errors raised by batched envs when a worker fails, dies or hangs.

A worker's own exception is re-raised in the main process with its original type;
the worker index, the command and the worker-side traceback are attached as a
note and as the ``__cause__`` (a :class:`RemoteTraceback`).
"""

from __future__ import annotations

import pickle
import signal


class RemoteTraceback(Exception):
    """The traceback text of an exception raised in a worker (shown as the cause)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f"\n\nTraceback in the worker:\n{self.text}"


class WorkerDiedError(RuntimeError):
    """A worker process ended (crash, signal, OOM killer) while the main process waited.

    Attributes:
        worker (int): the index of the worker process.
        exitcode (int): the exit code (negative: killed by signal ``-exitcode``).
        command (str): the command the worker was running.
    """

    def __init__(self, owner: str, worker: int, exitcode: int | None, command: str) -> None:
        self.worker = worker
        self.exitcode = exitcode
        self.command = command
        if exitcode is not None and exitcode < 0:
            try:
                how = f"was killed by signal {signal.Signals(-exitcode).name} ({-exitcode})"
            except ValueError:
                how = f"was killed by signal {-exitcode}"
        else:
            how = f"exited with code {exitcode}"
        super().__init__(
            f"{owner} worker {worker} {how} while running {command!r}. The other workers "
            f"were shut down and the env is closed. A SIGKILL often comes from the OOM "
            f"killer: lower num_workers or the memory each env uses, then build a new env."
        )


def encode_exception(exc: BaseException, traceback_text: str) -> bytes:
    """Pickle ``exc`` with its traceback text (falling back to a ``RuntimeError`` copy)."""
    try:
        payload = pickle.dumps(exc)
        pickle.loads(payload)
    except Exception:
        payload = pickle.dumps(RuntimeError(f"{type(exc).__name__}: {exc}"))
    return pickle.dumps((payload, traceback_text))


def decode_exception(blob: bytes, owner: str, worker: int, command: str) -> BaseException:
    """Rebuild a worker's exception, noting where it came from."""
    payload, traceback_text = pickle.loads(blob)
    exc = pickle.loads(payload)
    exc.add_note(f"Raised in {owner} worker {worker} while running {command!r}.")
    exc.__cause__ = RemoteTraceback(traceback_text)
    return exc
