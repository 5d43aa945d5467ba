"""The public surface of rl_transforms: version metadata and import hygiene."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import rl_transforms

OPTIONAL_BACKENDS = ("gymnasium", "gym", "envpool", "h5py", "chess", "dm_control", "pettingzoo", "vmas")


def test_version_matches_distribution_metadata():
    assert rl_transforms.__version__ == metadata.version("rl-transforms")


def test_all_names_resolve():
    missing = [name for name in rl_transforms.__all__ if not hasattr(rl_transforms, name)]
    assert missing == []


def test_import_loads_no_optional_backend():
    code = (
        "import sys, rl_transforms; "
        f"print([m for m in {OPTIONAL_BACKENDS!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
