"""Gym backend selection: ``set_gym_backend`` and ``gym_backend``.

gym and gymnasium may live side by side; one of them is the *current backend*,
used by every class and function of this package that builds or reads a gym
object. The default is gymnasium when installed, else gym.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

from rl_env_adapters._errors import GYM_EXTRA, install_line, is_installed

__all__ = ["gym_backend", "set_gym_backend"]

GYM_NAMES = ("gymnasium", "gym")

F = TypeVar("F", bound=Callable[..., Any])

_state: dict[str, Any] = {"backend": None, "generation": 0}


def _default_backend() -> ModuleType:
    for name in GYM_NAMES:
        if is_installed(name):
            return importlib.import_module(name)
    raise ImportError(
        "No gym backend is installed: gym_backend() needs gymnasium (or the legacy gym). "
        f"Install it with: {install_line(GYM_EXTRA)}"
    )


def _as_module(backend: str | ModuleType) -> ModuleType:
    if isinstance(backend, ModuleType):
        return backend
    if not isinstance(backend, str):
        raise TypeError(
            f"set_gym_backend expected a module or a module name such as 'gymnasium', "
            f"got {type(backend).__name__}. Pass gymnasium (the module) or the string 'gymnasium'."
        )
    try:
        return importlib.import_module(backend)
    except ModuleNotFoundError as err:
        raise ImportError(
            f"set_gym_backend could not import the backend {backend!r}. "
            f"Install gymnasium with: {install_line(GYM_EXTRA)} (or install {backend!r})."
        ) from err


def current_backend_name() -> str | None:
    """Name of the current backend without importing anything (``None`` if not chosen yet)."""
    backend = _state["backend"]
    return None if backend is None else backend.__name__.split(".")[0]


def gym_backend(submodule: str | None = None) -> ModuleType:
    """Return the current gym backend, or one of its submodules.

    Args:
        submodule (str, optional): dotted name inside the backend (``"wrappers"``,
            ``"spaces"``). Defaults to ``None`` (the backend itself).

    Raises:
        ImportError: if no backend is installed (names the extra to install), or the
            submodule does not exist in the current backend.

    Examples:
        >>> from rl_env_adapters import gym_backend, set_gym_backend
        >>> with set_gym_backend("gymnasium"):
        ...     print(gym_backend().__name__, gym_backend("wrappers").__name__)
        gymnasium gymnasium.wrappers
    """
    backend = _state["backend"]
    if backend is None:
        backend = _state["backend"] = _default_backend()
    if submodule is None:
        return backend
    name = f"{backend.__name__}.{submodule}"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        raise ImportError(
            f"gym_backend({submodule!r}) expected a submodule of {backend.__name__}, but {name} "
            f"does not exist. Check the name (e.g. 'wrappers', 'spaces', 'vector')."
        ) from err


def backend_generation() -> int:
    """A counter bumped at every backend switch; caches keyed on it go stale on switch."""
    return _state["generation"]


def _switch(backend: ModuleType | None) -> None:
    _state["backend"] = backend
    _state["generation"] += 1


class set_gym_backend:
    """Set the gym backend: as a context manager, as a decorator, or for good with ``set()``.

    Args:
        backend (str or module): ``"gymnasium"``, ``"gym"`` or the module itself.

    Raises:
        TypeError: if ``backend`` is neither a string nor a module.
        ImportError: if the named backend cannot be imported.

    Examples:
        >>> import gymnasium
        >>> from rl_env_adapters import gym_backend, set_gym_backend
        >>> with set_gym_backend(gymnasium):
        ...     print(gym_backend() is gymnasium)
        True
        >>> @set_gym_backend("gymnasium")
        ... def backend_name():
        ...     return gym_backend().__name__
        >>> backend_name()
        'gymnasium'
    """

    def __init__(self, backend: str | ModuleType) -> None:
        self.backend = _as_module(backend)
        self._previous: list[ModuleType | None] = []

    def set(self) -> None:
        """Make ``backend`` the current backend outside any context."""
        _switch(self.backend)

    def __enter__(self) -> set_gym_backend:
        self._previous.append(_state["backend"])
        _switch(self.backend)
        return self

    def __exit__(self, *exc: object) -> None:
        _switch(self._previous.pop())

    def __call__(self, func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with set_gym_backend(self.backend):
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]
