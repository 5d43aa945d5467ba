"""The hook behind ``EnvBase.append_transform``: rl-transforms registers ``TransformedEnv``.

Transforms live in a distribution above this one, so ``EnvBase`` cannot build a
``TransformedEnv`` itself; rl-transforms fills this registry when it is imported
(it is, as soon as a transform object exists to append).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# (env, transform) -> transformed env; Any: the transform type lives in rl-transforms
TransformedEnvFactory = Callable[[Any, Any], Any]

_FACTORY: list[TransformedEnvFactory] = []


def register_transformed_env_factory(factory: TransformedEnvFactory) -> None:
    """Make ``EnvBase.append_transform(t)`` return ``factory(env, t)``."""
    _FACTORY[:] = [factory]


def make_transformed_env(env: Any, transform: Any) -> Any:  # Any: see TransformedEnvFactory
    """Wrap ``env`` with ``transform`` through the registered factory.

    Raises:
        ImportError: when no distribution registered a factory (rl-transforms absent).
    """
    if not _FACTORY:
        raise ImportError(
            f"{type(env).__name__}.append_transform needs rl-transforms, which provides "
            "TransformedEnv. Install it with: pip install rl-transforms"
        )
    return _FACTORY[0](env, transform)
