"""Post-processors, as ``torchrl.data.postprocs``: re-exports only."""

from __future__ import annotations

from rl_replay import MultiStep

__all__ = ["MultiStep"]
