"""Data-side names, laid out like ``torchrl.data``: re-exports, never re-implementations.

The submodules mirror TorchRL's paths (``rl_stack.data.replay_buffers.samplers``,
``rl_stack.data.tensor_specs``, ``rl_stack.data.datasets``, ...).
"""

from __future__ import annotations

import rl_datasets
import rl_replay
import rl_specs
from rl_datasets import *
from rl_replay import *
from rl_specs import *
from rl_stack.data import datasets, map, postprocs, replay_buffers, tensor_specs

SOURCES = (rl_specs, rl_replay, rl_datasets)

__all__ = [name for module in SOURCES for name in module.__all__]
