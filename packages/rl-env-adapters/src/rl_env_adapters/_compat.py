"""Version shims between the legacy ``gym`` API and gymnasium 1.x (kept short on purpose)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Any in this module: backend objects and results are library-defined.

#: gymnasium 1.x vector auto-reset modes, by their enum value (lower case, no "_").
NEXT_STEP = "nextstep"
SAME_STEP = "samestep"
DISABLED = "disabled"


def step_result(result: tuple) -> tuple[Any, Any, Any, Any, Any]:
    """Normalise a step result to ``(obs, reward, terminated, truncated, info)``.

    gymnasium (and gym >= 0.26) return five values; older gym returns
    ``(obs, reward, done, info)``, read here as ``terminated=done, truncated=False``.

    Raises:
        ValueError: if the result has neither 4 nor 5 entries.
    """
    if len(result) == 5:
        return result  # type: ignore[return-value]
    if len(result) == 4:
        obs, reward, done, info = result
        return obs, reward, done, False, info
    raise ValueError(
        f"A gym step returns 5 values (obs, reward, terminated, truncated, info) or 4 "
        f"(obs, reward, done, info), got {len(result)}. Wrap the env so it follows gymnasium."
    )


def reset_result(result: Any) -> tuple[Any, Mapping]:
    """Normalise a reset result to ``(obs, info)`` (old gym returns the observation only)."""
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], Mapping):
        return result
    return result, {}


def seed_env(env: Any, seed: int | None) -> None:
    """Seed through ``reset(seed=...)`` (gym >= 0.22, gymnasium) or the old ``seed()``."""
    try:
        env.reset(seed=seed)
    except TypeError:
        env.seed(seed)


def autoreset_mode(env: Any) -> str:
    """Read a vector env's auto-reset mode (``NEXT_STEP`` when it does not declare one)."""
    mode = getattr(env, "metadata", {}).get("autoreset_mode", NEXT_STEP)
    return str(getattr(mode, "value", mode)).lower().replace("_", "")


def is_vector_env(env: Any) -> bool:
    """Say whether ``env`` is a gym(nasium) vector env (batched)."""
    return hasattr(env, "single_observation_space") and hasattr(env, "num_envs")
