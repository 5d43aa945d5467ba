"""Offline datasets, laid out like ``torchrl.data.datasets``: re-exports only."""

from __future__ import annotations

import rl_datasets
from rl_datasets import *

__all__ = [name for module in (rl_datasets,) for name in module.__all__]
