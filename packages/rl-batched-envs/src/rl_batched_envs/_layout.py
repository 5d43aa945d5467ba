"""How a ``ParallelEnv`` spreads its sub-envs over worker processes.

More busy processes than CPUs only add context switches: by default the sub-envs
are split over at most one worker per CPU this process may use.
"""

from __future__ import annotations

import os


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one).

    Examples:
        >>> usable_cpus() >= 1
        True
    """
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # no affinity API (macOS, Windows)
        return os.cpu_count() or 1


def worker_spans(
    num_envs: int, envs_per_worker: int | None, cpus: int | None = None
) -> list[tuple[int, int]]:
    """The ``(start, stop)`` env indices of each worker, in batch order.

    Args:
        num_envs: the number of sub-envs.
        envs_per_worker: sub-envs per worker (the last one may get fewer); ``None``
            splits them as evenly as possible over ``min(num_envs, cpus)`` workers.
        cpus: the CPUs to fill; defaults to :func:`usable_cpus`.

    Examples:
        >>> worker_spans(5, 2)
        [(0, 2), (2, 4), (4, 5)]
        >>> worker_spans(5, None, cpus=2)
        [(0, 3), (3, 5)]
        >>> worker_spans(2, None, cpus=16)
        [(0, 1), (1, 2)]
    """
    if envs_per_worker is not None:
        return [
            (s, min(s + envs_per_worker, num_envs)) for s in range(0, num_envs, envs_per_worker)
        ]
    workers = min(num_envs, cpus or usable_cpus())
    base, extra = divmod(num_envs, workers)
    spans, start = [], 0
    for w in range(workers):
        stop = start + base + (w < extra)
        spans.append((start, stop))
        start = stop
    return spans
