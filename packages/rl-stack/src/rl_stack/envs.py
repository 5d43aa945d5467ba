"""Environment-side names, laid out like ``torchrl.envs``: re-exports, never re-implementations."""

from __future__ import annotations

import rl_batched_envs
import rl_env_adapters
import rl_envs_core
import rl_transforms
from rl_batched_envs import *
from rl_env_adapters import *
from rl_envs_core import *
from rl_transforms import *

SOURCES = (rl_envs_core, rl_transforms, rl_batched_envs, rl_env_adapters)

__all__ = [name for module in SOURCES for name in module.__all__]
