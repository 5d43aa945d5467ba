"""The public surface of rl_env_adapters: version metadata and import hygiene."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import rl_env_adapters

OPTIONAL_BACKENDS = (
    "gymnasium",
    "gym",
    "envpool",
    "h5py",
    "chess",
    "dm_control",
    "pettingzoo",
    "vmas",
)


def test_version_matches_distribution_metadata():
    assert rl_env_adapters.__version__ == metadata.version("rl-env-adapters")


DOCUMENTED = sorted(
    [
        "GymEnv",
        "GymWrapper",
        "MultiThreadedEnv",
        "MultiThreadedEnvWrapper",
        "VecGymEnvTransform",
        "get_available_libraries",
        "gym_backend",
        "implement_for",
        "register_gym_spec_conversion",
        "set_gym_backend",
    ]
)


def test_all_is_the_documented_list():
    assert sorted(rl_env_adapters.__all__) == DOCUMENTED


def test_all_names_resolve():
    missing = [name for name in rl_env_adapters.__all__ if not hasattr(rl_env_adapters, name)]
    assert missing == []


def test_import_loads_no_optional_backend():
    code = (
        "import sys, rl_env_adapters; "
        f"print([m for m in {OPTIONAL_BACKENDS!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
