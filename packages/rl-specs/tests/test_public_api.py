"""The public surface of rl_specs: version metadata and import hygiene."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import rl_specs

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
    assert rl_specs.__version__ == metadata.version("rl-specs")


DOCUMENTED = {
    # torchrl.data TensorSpec section: the classes, their variants and the deprecated names
    "TensorSpec", "Binary", "Bounded", "BoundedContinuous", "BoundedDiscrete", "Categorical",
    "Composite", "MultiCategorical", "MultiOneHot", "NonTensor", "OneHot", "Stacked",
    "StackedComposite", "Unbounded", "UnboundedContinuous", "UnboundedDiscrete",
    "BinaryDiscreteTensorSpec", "BoundedTensorSpec", "CompositeSpec", "DiscreteTensorSpec",
    "LazyStackedCompositeSpec", "LazyStackedTensorSpec", "MultiDiscreteTensorSpec",
    "MultiOneHotDiscreteTensorSpec", "NonTensorSpec", "OneHotDiscreteTensorSpec",
    "UnboundedContinuousTensorSpec", "UnboundedDiscreteTensorSpec",
    # utils
    "consolidate_spec", "check_no_exclusive_keys", "contains_lazy_spec", "make_composite_from_td",
}  # fmt: skip


def test_all_is_the_documented_list():
    assert set(rl_specs.__all__) == DOCUMENTED
    assert len(rl_specs.__all__) == len(DOCUMENTED)


def test_all_names_resolve():
    missing = [name for name in rl_specs.__all__ if not hasattr(rl_specs, name)]
    assert missing == []


def test_import_loads_no_optional_backend():
    code = f"import sys, rl_specs; print([m for m in {OPTIONAL_BACKENDS!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_readme_example_runs():
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.DOTALL)
    assert blocks, "the README has no python example"
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})
