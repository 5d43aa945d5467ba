"""Missing-backend errors: one helper builds every ImportError of this package."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

GYM_EXTRA = "gym"
ENVPOOL_EXTRA = "envpool"

_DISTRIBUTION = "rl-env-adapters"


def install_line(extra: str) -> str:
    """Return the pip command that installs ``extra`` of this distribution."""
    return f"pip install '{_DISTRIBUTION}[{extra}]'"


def missing_backend(owner: str, module: str, extra: str) -> ImportError:
    """Build the ImportError raised when ``owner`` needs ``module`` and it is absent.

    Args:
        owner (str): the class or function that needs the backend.
        module (str): the importable backend name (``"gymnasium"``).
        extra (str): the extra of this distribution that installs it.

    Examples:
        >>> print(missing_backend("GymEnv", "gymnasium", GYM_EXTRA))
        GymEnv needs gymnasium. Install it with: pip install 'rl-env-adapters[gym]'
    """
    return ImportError(f"{owner} needs {module}. Install it with: {install_line(extra)}")


def is_installed(module: str) -> bool:
    """Say whether ``module`` can be imported, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def import_backend(module: str, *, owner: str, extra: str) -> ModuleType:
    """Import ``module`` or raise the install-line ImportError for ``owner``.

    Raises:
        ImportError: when ``module`` is not installed; the message names ``extra``.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name is not None and err.name.split(".")[0] != module.split(".")[0]:
            raise
        raise missing_backend(owner, module, extra) from err
