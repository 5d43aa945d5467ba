"""Offline RL datasets stored as replay buffers."""

from __future__ import annotations

from rl_datasets._atari_dqn import AtariDQNExperienceReplay
from rl_datasets._base import BaseDatasetExperienceReplay
from rl_datasets._d4rl import D4RLExperienceReplay
from rl_datasets._gen_dgrl import GenDGRLExperienceReplay
from rl_datasets._minari import MinariExperienceReplay
from rl_datasets._openml import OpenMLExperienceReplay
from rl_datasets._openx import OpenXExperienceReplay
from rl_datasets._roboset import RobosetExperienceReplay
from rl_datasets._vd4rl import VD4RLExperienceReplay

__version__ = "0.1.0"

__all__ = [
    "AtariDQNExperienceReplay",
    "BaseDatasetExperienceReplay",
    "D4RLExperienceReplay",
    "GenDGRLExperienceReplay",
    "MinariExperienceReplay",
    "OpenMLExperienceReplay",
    "OpenXExperienceReplay",
    "RobosetExperienceReplay",
    "VD4RLExperienceReplay",
]
