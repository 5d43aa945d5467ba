"""``implement_for``: pick a function's implementation from an installed module's version."""

from __future__ import annotations

import functools
import importlib
import re
import sys
from collections.abc import Callable
from importlib import metadata
from types import ModuleType
from typing import Any, ClassVar

from rl_env_adapters._gym._backend import GYM_NAMES, backend_generation, current_backend_name

__all__ = ["implement_for"]

_VERSION_RE = re.compile(r"\d+(?:\.\d+)*")


def _parse_version(version: str) -> tuple[int, ...]:
    """Turn ``"0.26.2"`` (or ``"1.0.0a1"``) into a comparable tuple of ints."""
    match = _VERSION_RE.match(str(version))
    if match is None:
        raise ValueError(
            f"implement_for expected a version such as '0.26.0', got {version!r}. "
            "Pass a dotted numeric version string."
        )
    parts = [int(p) for p in match.group(0).split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def _module_version(module: ModuleType) -> str | None:
    version = getattr(module, "__version__", None)
    if version is not None:
        return str(version)
    try:
        return metadata.version(module.__name__.split(".")[0])
    except metadata.PackageNotFoundError:
        return None


def _resolve_module(module_name: str | Callable[[], ModuleType]) -> ModuleType | None:
    if callable(module_name):
        try:
            return module_name()
        except ImportError:
            return None
    module = sys.modules.get(module_name)
    if module is not None:
        return module
    try:
        return importlib.import_module(module_name)
    except ImportError:
        return None


class _Dispatcher:
    """The callable left in place of every ``@implement_for`` function of one name."""

    def __init__(self, qualname: str) -> None:
        self.qualname = qualname
        self.candidates: list[implement_for] = []

    def select(self) -> Callable[..., Any]:
        chosen = None
        seen = []
        backend = current_backend_name()
        for candidate in self.candidates:
            if (
                backend is not None
                and candidate.module_name in GYM_NAMES
                and candidate.module_name != backend
            ):
                seen.append(f"{candidate.describe()} (gym backend is {backend})")
                continue
            module = _resolve_module(candidate.module_name)
            if module is None:
                seen.append(f"{candidate.describe()} (module not installed)")
                continue
            version = _module_version(module)
            if version is not None and candidate.accepts(version, module):
                chosen = candidate  # the last fitting implementation wins
            else:
                seen.append(f"{candidate.describe()} (found {module.__name__} {version})")
        if chosen is None:
            raise ModuleNotFoundError(
                f"No implementation of {self.qualname!r} supports the installed modules. "
                f"Tried: {'; '.join(seen)}. Install a module version inside one of these ranges."
            )
        return chosen.func


class implement_for:
    """Version decorator: registers one implementation of a function for a module version range.

    Several functions with the same qualified name, each decorated for a different
    range, form one dispatcher. When it is called, the module is looked up, its version
    compared with every range (``from_version`` included, ``to_version`` excluded,
    ``None`` open), and the last fitting implementation runs. If the module is missing
    or no range fits, the call raises :class:`ModuleNotFoundError`.

    Args:
        module_name (str or callable): the module whose version is checked (``"gym"``), or a
            zero-argument callable returning that module (for instance ``gym_backend``).
        from_version (str, optional): first compatible version. Defaults to ``None`` (open).
        to_version (str, optional): first incompatible version. Defaults to ``None`` (open).

    Keyword Args:
        class_method (bool, optional): make the dispatcher a ``classmethod``. Defaults to ``False``.
        compilable (bool, optional): resolve the implementation eagerly, at decoration time.
            Defaults to ``False`` (resolved on first call).

    Raises:
        ValueError: if a version string is not a dotted number.

    Examples:
        >>> import sys, types
        >>> sys.modules["toylib"] = types.SimpleNamespace(__name__="toylib", __version__="0.26.2")
        >>> @implement_for("toylib", None, "0.26.0")
        ... def fun():
        ...     return 0
        >>> @implement_for("toylib", "0.26.0", None)
        ... def fun():
        ...     return 1
        >>> fun()
        1
        >>> del sys.modules["toylib"]
    """

    _registry: ClassVar[dict[str, _Dispatcher]] = {}
    _cache: ClassVar[dict[str, tuple[int, Callable[..., Any]]]] = {}

    def __init__(
        self,
        module_name: str | Callable[[], ModuleType],
        from_version: str | None = None,
        to_version: str | None = None,
        *,
        class_method: bool = False,
        compilable: bool = False,
    ) -> None:
        self.module_name = module_name
        self.from_version = from_version
        self.to_version = to_version
        self._low = None if from_version is None else _parse_version(from_version)
        self._high = None if to_version is None else _parse_version(to_version)
        self.class_method = class_method
        self.compilable = compilable
        self.func: Callable[..., Any] = None  # type: ignore[assignment]

    def describe(self) -> str:
        name = self.module_name if isinstance(self.module_name, str) else "<callable>"
        return f"{name} [{self.from_version or '-inf'}, {self.to_version or 'inf'})"

    def accepts(self, version: str, module: ModuleType) -> bool:
        """Say whether ``version`` of ``module`` falls in this implementation's range."""
        if isinstance(self.module_name, str):
            wanted = self.module_name.split(".")[0]
            if module.__name__.split(".")[0] != wanted:
                return False
        parsed = _parse_version(version)
        if self._low is not None and parsed < self._low:
            return False
        return not (self._high is not None and parsed >= self._high)

    @classmethod
    def reset(cls) -> None:
        """Forget every resolved implementation; the next calls look the versions up again."""
        cls._cache.clear()

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        self.func = func
        qualname = f"{func.__module__}.{func.__qualname__}"
        dispatcher = self._registry.get(qualname)
        if dispatcher is None:
            dispatcher = self._registry[qualname] = _Dispatcher(qualname)
        dispatcher.candidates.append(self)
        self._cache.pop(qualname, None)
        cache = self._cache

        @functools.wraps(func)
        def dispatch(*args: Any, **kwargs: Any) -> Any:
            entry = cache.get(qualname)
            generation = backend_generation()
            if entry is None or entry[0] != generation:
                entry = cache[qualname] = (generation, dispatcher.select())
            return entry[1](*args, **kwargs)

        if self.compilable:
            try:
                cache[qualname] = (backend_generation(), dispatcher.select())
            except ModuleNotFoundError:
                pass
        if self.class_method:
            return classmethod(dispatch)  # type: ignore[return-value]
        return dispatch
