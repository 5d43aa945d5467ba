"""Environment and replay-buffer transforms, TransformedEnv and Compose."""

from __future__ import annotations

from rl_transforms._base import Compose, Transform
from rl_transforms._bookkeeping import InitTracker, RewardSum, StepCounter
from rl_transforms._catframes import CatFrames
from rl_transforms._dtype_device import (
    DeviceCastTransform,
    DoubleToFloat,
    DTypeCastTransform,
    PinMemoryTransform,
)
from rl_transforms._env import TransformedEnv
from rl_transforms._normalization import ObservationNorm, VecNorm, VecNormV2
from rl_transforms._primer import TensorDictPrimer
from rl_transforms._reward import BinarizeReward, RewardClipping, RewardScaling
from rl_transforms._selection import (
    ExcludeTransform,
    RemoveEmptySpecs,
    RenameTransform,
    SelectTransform,
)

__version__ = "0.1.0"

__all__: list[str] = [
    "BinarizeReward",
    "CatFrames",
    "Compose",
    "DTypeCastTransform",
    "DeviceCastTransform",
    "DoubleToFloat",
    "ExcludeTransform",
    "InitTracker",
    "ObservationNorm",
    "PinMemoryTransform",
    "RemoveEmptySpecs",
    "RenameTransform",
    "RewardClipping",
    "RewardScaling",
    "RewardSum",
    "SelectTransform",
    "StepCounter",
    "TensorDictPrimer",
    "Transform",
    "TransformedEnv",
    "VecNorm",
    "VecNormV2",
]
