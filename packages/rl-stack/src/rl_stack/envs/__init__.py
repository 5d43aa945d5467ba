"""Environment-side names, laid out like ``torchrl.envs``: re-exports, never re-implementations.

The submodules mirror TorchRL's paths (``rl_stack.envs.libs.gym``,
``rl_stack.envs.transforms``, ``rl_stack.envs.utils``, ...), so code written against
``torchrl.envs`` runs after changing only its imports.
"""

from __future__ import annotations

import rl_batched_envs
import rl_env_adapters
import rl_envs_core
import rl_transforms
from rl_batched_envs import *
from rl_env_adapters import *
from rl_envs_core import *
from rl_specs import make_composite_from_td
from rl_stack.envs import (
    async_envs,
    batched_envs,
    common,
    custom,
    env_creator,
    gym_like,
    libs,
    model_based,
    transforms,
    utils,
)
from rl_transforms import *

SOURCES = (rl_envs_core, rl_transforms, rl_batched_envs, rl_env_adapters)

__all__ = [name for module in SOURCES for name in module.__all__] + ["make_composite_from_td"]
