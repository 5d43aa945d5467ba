"""Pretrained visual encoders as transforms: R3M, VIP (reward too) and VC-1.

Architectures come from ``transformers`` (extra ``vision``); published weights are
downloaded once into a cache and loaded without running code from the file.
"""

from __future__ import annotations

from rl_transforms._encoders._r3m import R3MTransform
from rl_transforms._encoders._vc1 import VC1Transform
from rl_transforms._encoders._vip import VIPRewardTransform, VIPTransform

__all__ = ["R3MTransform", "VC1Transform", "VIPRewardTransform", "VIPTransform"]
