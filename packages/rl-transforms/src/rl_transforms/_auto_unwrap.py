"""The global switch deciding whether ``TransformedEnv(TransformedEnv(env))`` flattens the chain.

The setting lives in the ``AUTO_UNWRAP_TRANSFORMED_ENV`` environment variable, so worker
processes started while it is set (``ParallelEnv``) see the same value as their parent.
"""

from __future__ import annotations

import os
from contextlib import ContextDecorator
from typing import Any

ENV_VAR = "AUTO_UNWRAP_TRANSFORMED_ENV"
DEFAULT = True
_TRUE = {"1", "true", "yes", "on", "y", "t"}
_FALSE = {"0", "false", "no", "off", "n", "f"}


def _parse(raw: str) -> bool:
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(
        f"{ENV_VAR} must be a boolean such as 'True' or 'False', got {raw!r}. "
        f"Set it to one of {sorted(_TRUE | _FALSE)} or unset it."
    )


def auto_unwrap_transformed_env(allow_none: bool = False) -> bool | None:
    """Return whether a ``TransformedEnv`` built on a ``TransformedEnv`` flattens the two chains.

    Args:
        allow_none (bool, optional): return ``None`` when nothing was set (neither by
            :class:`set_auto_unwrap_transformed_env` nor through the
            ``AUTO_UNWRAP_TRANSFORMED_ENV`` environment variable) instead of the default
            ``True``. Defaults to ``False``.

    Raises:
        ValueError: if ``AUTO_UNWRAP_TRANSFORMED_ENV`` holds something that is not a boolean.

    Examples:
        >>> auto_unwrap_transformed_env()
        True
        >>> with set_auto_unwrap_transformed_env(False):
        ...     auto_unwrap_transformed_env()
        False
    """
    raw = os.environ.get(ENV_VAR)
    if raw is None:
        return None if allow_none else DEFAULT
    return _parse(raw)


class set_auto_unwrap_transformed_env(ContextDecorator):  # TorchRL's public name, lower case
    """Choose whether nested ``TransformedEnv`` instances are flattened, as a context manager or decorator.

    With ``mode=True`` (the default behaviour), ``TransformedEnv(TransformedEnv(env, t1), t2)``
    wraps ``env`` directly with ``Compose(t1', t2)``; with ``mode=False`` it keeps the inner
    transformed env as its base env. An explicit ``auto_unwrap=`` argument of
    ``TransformedEnv`` wins over this setting. :meth:`set` applies it for the rest of the
    program.

    Args:
        mode (bool): whether to flatten nested transformed envs.

    Examples:
        >>> from rl_envs_core.testing import CountingEnv
        >>> from rl_transforms import StepCounter, TransformedEnv
        >>> inner = TransformedEnv(CountingEnv(), StepCounter())
        >>> with set_auto_unwrap_transformed_env(False):
        ...     env = TransformedEnv(inner, StepCounter(step_count_key="other"))
        >>> env.base_env is inner
        True
        >>> type(TransformedEnv(inner).base_env).__name__
        'CountingEnv'
    """

    def __init__(self, mode: bool) -> None:
        self.mode = bool(mode)
        self._saved: list[str | None] = []

    def set(self) -> None:
        """Apply the setting now, without restoring it later."""
        os.environ[ENV_VAR] = str(self.mode)

    def __enter__(self) -> set_auto_unwrap_transformed_env:
        self._saved.append(os.environ.get(ENV_VAR))
        self.set()
        return self

    def __exit__(self, *exc: Any) -> None:  # Any: the exception triple of a with block
        previous = self._saved.pop()
        if previous is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = previous
