"""Optional backends of the dataset readers, imported when a dataset needs them.

``import rl_datasets`` loads none of them; each reader asks for its client here, and a
missing one is an ``ImportError`` carrying the install line of the extra that brings it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["EXTRA_H5", "EXTRA_HUB", "EXTRA_OPENML", "require"]

EXTRA_H5 = "h5"
EXTRA_HUB = "hub"
EXTRA_OPENML = "openml"


def require(module: str, *, extra: str, owner: str) -> ModuleType:
    """Import ``module`` for ``owner``, or raise an ImportError naming the extra to install.

    Raises:
        ImportError: if ``module`` is not installed.

    Examples:
        >>> require("json", extra="h5", owner="D4RLExperienceReplay").__name__
        'json'
        >>> require("not_a_module_xyz", extra="h5", owner="D4RLExperienceReplay")
        Traceback (most recent call last):
        ...
        ImportError: D4RLExperienceReplay needs not_a_module_xyz. Install it with: pip install 'rl-datasets[h5]'
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f"{owner} needs {module}. Install it with: pip install 'rl-datasets[{extra}]'"
        ) from err
