"""Skip the doctests of ChessEnv when python-chess (the ``chess`` extra) is not installed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

# module file of rl_envs_core -> the optional package its doctests need
_BACKEND_FILES = {"_chess.py": "chess"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if not isinstance(item, pytest.DoctestItem):
            continue
        module = _BACKEND_FILES.get(Path(str(item.path)).name)
        if module is not None and importlib.util.find_spec(module) is None:
            item.add_marker(pytest.mark.skip(reason=f"{module} is not installed (extra 'chess')"))
