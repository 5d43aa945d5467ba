"""``get_available_libraries``: which simulator backends this package can drive here."""

from __future__ import annotations

from rl_env_adapters._errors import ENVPOOL_EXTRA, GYM_EXTRA, is_installed

__all__ = ["get_available_libraries"]

# importable module name -> extra of this distribution that installs it
SUPPORTED_LIBRARIES: dict[str, str] = {
    "gymnasium": GYM_EXTRA,
    "gym": GYM_EXTRA,
    "envpool": ENVPOOL_EXTRA,
}


def get_available_libraries() -> dict[str, bool]:
    """Returns all the supported libraries, each mapped to whether it is installed.

    Nothing is imported: availability is read from the import system's finders.

    Examples:
        >>> from rl_env_adapters import get_available_libraries
        >>> libs = get_available_libraries()
        >>> sorted(libs)
        ['envpool', 'gym', 'gymnasium']
        >>> all(isinstance(v, bool) for v in libs.values())
        True
    """
    return {name: is_installed(name) for name in sorted(SUPPORTED_LIBRARIES)}
