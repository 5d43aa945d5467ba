"""Skip a backend module's doctests when that backend is not installed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

# folder of rl_env_adapters -> module that its doctests need
_BACKEND_DIRS = {"_gym": "gymnasium", "_envpool": "envpool"}


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if not isinstance(item, pytest.DoctestItem):
            continue
        parts = Path(str(item.path)).parts
        for folder, module in _BACKEND_DIRS.items():
            if folder in parts and not _installed(module):
                item.add_marker(pytest.mark.skip(reason=f"{module} is not installed"))
