"""The public surface of rl_datasets: version metadata and import hygiene."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import rl_datasets

OPTIONAL_BACKENDS = (
    "gymnasium",
    "gym",
    "envpool",
    "h5py",
    "chess",
    "dm_control",
    "pettingzoo",
    "vmas",
    "huggingface_hub",
    "datasets",
    "minari",
    "sklearn",
    "pandas",
)
# torchrl.data.datasets' documented names (seed 003, "Datasets")
DOCUMENTED = [
    "AtariDQNExperienceReplay",
    "BaseDatasetExperienceReplay",
    "D4RLExperienceReplay",
    "GenDGRLExperienceReplay",
    "MinariExperienceReplay",
    "OpenMLExperienceReplay",
    "OpenXExperienceReplay",
    "RobosetExperienceReplay",
    "VD4RLExperienceReplay",
]


def test_version_matches_distribution_metadata():
    assert rl_datasets.__version__ == metadata.version("rl-datasets")


def test_all_names_resolve():
    missing = [name for name in rl_datasets.__all__ if not hasattr(rl_datasets, name)]
    assert missing == []


def test_import_loads_no_optional_backend():
    code = f"import sys, rl_datasets; print([m for m in {OPTIONAL_BACKENDS!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_all_is_a_subset_of_the_documented_names():
    assert set(rl_datasets.__all__) <= set(DOCUMENTED)
