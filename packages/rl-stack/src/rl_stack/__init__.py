"""Meta-package: rl_stack.envs and rl_stack.data facades over every rl-stack distribution."""

from __future__ import annotations

__version__ = "0.1.0"

__all__: list[str] = []
