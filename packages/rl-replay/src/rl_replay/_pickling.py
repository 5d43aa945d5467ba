"""Pickling a buffer: its components without their thread locks (:class:`_LockFree`), its
prefetched batches in flight with it."""

from __future__ import annotations

import multiprocessing
import multiprocessing.synchronize
import threading
from collections import deque
from typing import Any

from rl_replay._prefetch import prefetch_state, restore_prefetch

_LOCK_TYPES = (type(threading.Lock()), type(threading.RLock()))


class _LockFree:
    """A component pickled without its thread locks (fresh locks are made on restore).

    A process lock (the writer's) travels to a process being started, so both sides
    share it; any other pickling gets a fresh one, as a copy shares nothing.
    """

    def __init__(self, component: Any) -> None:
        self.cls = type(component)
        self.state = dict(component.__dict__)
        self.locks = [name for name, value in self.state.items() if isinstance(value, _LOCK_TYPES)]
        self.kinds = [
            isinstance(self.state.pop(name), type(threading.RLock())) for name in self.locks
        ]
        spawning = multiprocessing.context.get_spawning_popen() is not None
        self.process_locks = [
            name
            for name, value in self.state.items()
            if isinstance(value, multiprocessing.synchronize.Lock) and not spawning
        ]
        for name in self.process_locks:
            del self.state[name]

    def restore(self) -> Any:
        component = self.cls.__new__(self.cls)
        for name, reentrant in zip(self.locks, self.kinds, strict=True):
            self.state[name] = threading.RLock() if reentrant else threading.Lock()
        for name in self.process_locks:
            self.state[name] = multiprocessing.get_context("spawn").Lock()
        component.__dict__.update(self.state)
        return component


def buffer_state(buffer: Any) -> dict[str, Any]:  # Any: a ReplayBuffer
    """A replay buffer's pickled state: no lock, executor or futures; batches in flight kept."""
    pending = prefetch_state(buffer) if buffer._futures else None  # batches in flight travel
    state = buffer.__dict__.copy()
    for name in ("_lock", "_executor", "_futures"):
        state.pop(name)
    state["_pending_prefetch"] = pending
    # Components may hold thread locks (samplers do); those cannot cross a process
    # boundary, so they travel as markers and are recreated on the other side.
    for name in ("_sampler", "_writer"):
        state[name] = _LockFree(state[name])
    return state


def restore_buffer(buffer: Any, state: dict[str, Any]) -> None:  # Any: a ReplayBuffer
    """Rebuild a replay buffer from :func:`buffer_state`'s state (fresh lock and futures)."""
    for name in ("_sampler", "_writer"):
        state[name] = state[name].restore()
    pending = state.pop("_pending_prefetch", None)
    buffer.__dict__.update(state)
    buffer._storage.attach(buffer._writer)
    buffer._storage.attach(buffer._sampler)
    buffer._lock = threading.RLock()
    buffer._executor = None
    buffer._futures = deque()
    if pending is not None:
        restore_prefetch(buffer, pending)
