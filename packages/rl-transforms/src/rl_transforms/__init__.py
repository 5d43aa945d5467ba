"""Environment and replay-buffer transforms, TransformedEnv and Compose."""

from __future__ import annotations

from rl_transforms._base import Compose, Transform
from rl_transforms._bookkeeping import InitTracker, RewardSum, StepCounter
from rl_transforms._dtype_device import (
    DeviceCastTransform,
    DoubleToFloat,
    DTypeCastTransform,
    PinMemoryTransform,
)
from rl_transforms._env import TransformedEnv
from rl_transforms._normalization import ObservationNorm, VecNorm, VecNormV2
from rl_transforms._reward import BinarizeReward, RewardClipping, RewardScaling

__version__ = "0.1.0"

__all__: list[str] = [
    "BinarizeReward",
    "Compose",
    "DTypeCastTransform",
    "DeviceCastTransform",
    "DoubleToFloat",
    "InitTracker",
    "ObservationNorm",
    "PinMemoryTransform",
    "RewardClipping",
    "RewardScaling",
    "RewardSum",
    "StepCounter",
    "Transform",
    "TransformedEnv",
    "VecNorm",
    "VecNormV2",
]
