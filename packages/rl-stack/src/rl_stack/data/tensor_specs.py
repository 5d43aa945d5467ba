"""Specs, as ``torchrl.data.tensor_specs``: re-exports only."""

from __future__ import annotations

import rl_specs
from rl_specs import *

__all__ = [name for module in (rl_specs,) for name in module.__all__]
