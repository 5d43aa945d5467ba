"""The public surface of rl_stack: version metadata and import hygiene."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import rl_stack

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
    assert rl_stack.__version__ == metadata.version("rl-stack")


def test_all_names_resolve():
    missing = [name for name in rl_stack.__all__ if not hasattr(rl_stack, name)]
    assert missing == []


def test_import_loads_no_optional_backend():
    code = f"import sys, rl_stack; print([m for m in {OPTIONAL_BACKENDS!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
