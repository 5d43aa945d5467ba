"""Simulator backends, laid out like ``torchrl.envs.libs``: re-exports only.

Importing this package imports no backend (gymnasium, envpool); they load when an env is built.
"""

from __future__ import annotations

import rl_env_adapters
from rl_env_adapters import *
from rl_stack.envs.libs import envpool, gym

__all__ = list(rl_env_adapters.__all__)
