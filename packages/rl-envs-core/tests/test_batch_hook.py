"""The registry through which env wrappers build a ParallelEnv without importing it."""

from __future__ import annotations

import pytest

from rl_envs_core import _batch_hook
from rl_envs_core.extension import make_parallel_env, register_parallel_env_factory
from rl_envs_core.testing import CountingEnv


def test_without_a_registered_factory_the_error_names_the_distribution(monkeypatch):
    monkeypatch.setattr(_batch_hook, "_FACTORY", [])
    with pytest.raises(ImportError, match="pip install rl-batched-envs"):
        make_parallel_env(2, CountingEnv)


def test_the_registered_factory_gets_the_workers_the_factory_and_the_options(monkeypatch):
    monkeypatch.setattr(_batch_hook, "_FACTORY", [])
    register_parallel_env_factory(lambda n, fn, **options: (n, fn, options))
    assert make_parallel_env(3, CountingEnv, use_buffers=False) == (
        3,
        CountingEnv,
        {"use_buffers": False},
    )
