"""The public surface of rl_envs_core: version metadata and import hygiene."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import rl_envs_core
from rl_envs_core import _native

#: The torchrl.envs names implemented by the core of this package (EnvBase and helpers).
CORE_NAMES = [
    "EnvBase",
    "EnvMetaData",
    "GymLikeEnv",
    "MarlGroupMapType",
    "check_env_specs",
    "check_marl_grouping",
    "step_mdp",
    "terminated_or_truncated",
]
#: The documented names the native-envs subpackage may export.
NATIVE_NAMES = {
    "ChessEnv", "PendulumEnv", "TicTacToeEnv", "LLMHashingEnv", "ModelBasedEnvBase",
    "DreamerEnv", "DreamerDecoder", "RandomPolicy", "ExplorationType", "exploration_type",
    "set_exploration_type",
}

OPTIONAL_BACKENDS = ("gymnasium", "gym", "envpool", "h5py", "chess", "dm_control", "pettingzoo", "vmas")


def test_version_matches_distribution_metadata():
    assert rl_envs_core.__version__ == metadata.version("rl-envs-core")


def test_all_names_resolve():
    missing = [name for name in rl_envs_core.__all__ if not hasattr(rl_envs_core, name)]
    assert missing == []


def test_import_loads_no_optional_backend():
    code = (
        "import sys, rl_envs_core; "
        f"print([m for m in {OPTIONAL_BACKENDS!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_all_is_core_names_then_native_names():
    assert rl_envs_core.__all__ == [*CORE_NAMES, *_native.__all__]
    assert set(_native.__all__) <= NATIVE_NAMES


def test_testing_module_exposes_the_contract():
    from rl_envs_core import testing

    assert {"CountingEnv", "EnvContract"} <= set(dir(testing))
