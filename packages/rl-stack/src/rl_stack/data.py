"""Data-side names, laid out like ``torchrl.data``: re-exports, never re-implementations."""

from __future__ import annotations

import rl_datasets
import rl_replay
import rl_specs
from rl_datasets import *
from rl_replay import *
from rl_specs import *

SOURCES = (rl_specs, rl_replay, rl_datasets)

__all__ = [name for module in SOURCES for name in module.__all__]
