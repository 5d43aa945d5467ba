"""EnvBase, the TED rollout machinery and native environments."""

from __future__ import annotations

from rl_envs_core import _native
from rl_envs_core._native import *

__version__ = "0.1.0"

__all__: list[str] = [*_native.__all__]
