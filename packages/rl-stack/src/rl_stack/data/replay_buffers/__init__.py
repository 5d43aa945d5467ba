"""Replay buffers, laid out like ``torchrl.data.replay_buffers``: re-exports only."""

from __future__ import annotations

import rl_replay
from rl_replay import *

__all__ = [name for module in (rl_replay,) for name in module.__all__]
