"""The public surface of rl_batched_envs: version metadata and import hygiene."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import rl_batched_envs

OPTIONAL_BACKENDS = (
    "gymnasium",
    "gym",
    "envpool",
    "h5py",
    "chess",
    "dm_control",
    "pettingzoo",
    "vmas",
    "ray",
)


def test_version_matches_distribution_metadata():
    assert rl_batched_envs.__version__ == metadata.version("rl-batched-envs")


def test_all_names_resolve():
    missing = [name for name in rl_batched_envs.__all__ if not hasattr(rl_batched_envs, name)]
    assert missing == []


def test_import_loads_no_optional_backend():
    code = (
        "import sys, rl_batched_envs; "
        f"print([m for m in {OPTIONAL_BACKENDS!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


DOCUMENTED = [
    "AsyncCollector",
    "AsyncEnvPool",
    "BaseCollector",
    "Collector",
    "DataCollectorBase",
    "EnvCreator",
    "MultiAsyncCollector",
    "MultiCollector",
    "MultiSyncCollector",
    "MultiSyncDataCollector",
    "MultiaSyncDataCollector",
    "ParallelEnv",
    "ProcessorAsyncEnvPool",
    "RayCollector",
    "SerialEnv",
    "SyncDataCollector",
    "ThreadingAsyncEnvPool",
    "aSyncDataCollector",
    "split_trajectories",
]


def test_all_is_the_documented_list():
    assert sorted(rl_batched_envs.__all__) == sorted(DOCUMENTED)


def test_torchrl_014_collector_names_are_aliases():
    assert rl_batched_envs.Collector is rl_batched_envs.SyncDataCollector
    assert rl_batched_envs.MultiSyncCollector is rl_batched_envs.MultiSyncDataCollector
    assert rl_batched_envs.MultiAsyncCollector is rl_batched_envs.MultiaSyncDataCollector
    assert rl_batched_envs.AsyncCollector is rl_batched_envs.aSyncDataCollector
    assert rl_batched_envs.BaseCollector is rl_batched_envs.DataCollectorBase
