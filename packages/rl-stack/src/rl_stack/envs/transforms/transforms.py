"""Transforms, as ``torchrl.envs.transforms.transforms``: re-exports only."""

from __future__ import annotations

import rl_transforms
from rl_transforms import *

__all__ = [name for module in (rl_transforms,) for name in module.__all__]
