"""Version shims between the legacy ``gym`` API and gymnasium 1.x (kept short on purpose)."""

from __future__ import annotations

from typing import Any

# Any in this module: backend objects and results are library-defined.

#: gymnasium 1.x vector auto-reset modes, by their enum value (lower case, no "_").
NEXT_STEP = "nextstep"
SAME_STEP = "samestep"
DISABLED = "disabled"


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
