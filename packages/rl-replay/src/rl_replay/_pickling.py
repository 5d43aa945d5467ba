"""Pickling a buffer's components without their thread locks (:class:`_LockFree`)."""

from __future__ import annotations

import multiprocessing
import multiprocessing.synchronize
import threading
from typing import Any

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
