"""The hook behind ``GymEnv(..., num_workers=n)``: rl-batched-envs registers ``ParallelEnv``.

Env wrappers (rl-env-adapters) sit beside rl-batched-envs, not above it, so they
cannot build a ``ParallelEnv`` themselves; rl-batched-envs fills this registry when
it is imported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# (num_workers, create_env_fn, **options) -> batched env; Any: the options and the env
ParallelEnvFactory = Callable[..., Any]

_FACTORY: list[ParallelEnvFactory] = []


def register_parallel_env_factory(factory: ParallelEnvFactory) -> None:
    """Make :func:`make_parallel_env` build its envs with ``factory``."""
    _FACTORY[:] = [factory]


def make_parallel_env(
    num_workers: int, create_env_fn: Callable[..., Any], **options: Any
) -> Any:  # Any: see ParallelEnvFactory
    """A batched env running ``num_workers`` envs built by ``create_env_fn`` in processes.

    Raises:
        ImportError: when no distribution registered a factory (rl-batched-envs is
            not installed or not imported).
    """
    if not _FACTORY:
        raise ImportError(
            "Running envs in worker processes needs rl-batched-envs, which provides "
            "ParallelEnv. Install it (pip install rl-batched-envs) and import "
            "rl_batched_envs (or rl_stack.envs) first."
        )
    return _FACTORY[0](num_workers, create_env_fn, **options)
