"""Optional backends of rl-transforms: one helper imports them or names the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

_DISTRIBUTION = "rl-transforms"

#: The extras of rl-transforms, one per group of backends.
VIDEO = "video"
LOGGERS = "loggers"
TEXT = "text"


def install_line(extra: str) -> str:
    """The pip command that installs ``extra`` of rl-transforms."""
    return f"pip install '{_DISTRIBUTION}[{extra}]'"


def require(module: str, *, owner: str, extra: str) -> ModuleType:
    """Import ``module`` or raise an ``ImportError`` naming ``owner`` and the extra to install.

    Raises:
        ImportError: when ``module`` is not installed.

    Examples:
        >>> require("math", owner="Example", extra=VIDEO).sqrt(4.0)
        2.0
        >>> try:
        ...     require("not_a_real_module_xyz", owner="Example", extra=VIDEO)
        ... except ImportError as err:
        ...     print(err)
        Example needs not_a_real_module_xyz. Install it with: pip install 'rl-transforms[video]'
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f"{owner} needs {module.split('.')[0]}. Install it with: {install_line(extra)}"
        ) from err
