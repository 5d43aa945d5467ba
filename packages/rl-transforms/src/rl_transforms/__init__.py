"""Environment and replay-buffer transforms, TransformedEnv and Compose."""

from __future__ import annotations

from rl_transforms._action import ActionDiscretizer, ActionMask, DiscreteActionProjection
from rl_transforms._auto_reset import AutoResetEnv, AutoResetTransform
from rl_transforms._auto_unwrap import auto_unwrap_transformed_env, set_auto_unwrap_transformed_env
from rl_transforms._base import ObservationTransform, Transform
from rl_transforms._batch_size import BatchSizeTransform
from rl_transforms._bookkeeping import InitTracker, RewardSum, StepCounter, TargetReturn
from rl_transforms._burn_in import BurnInTransform
from rl_transforms._compose import Compose
from rl_transforms._dtype_device import (
    DeviceCastTransform,
    DoubleToFloat,
    DTypeCastTransform,
    PinMemoryTransform,
)
from rl_transforms._elementwise import (
    ClipTransform,
    FiniteTensorDictCheck,
    SignTransform,
    UnaryTransform,
)
from rl_transforms._encoders import R3MTransform, VC1Transform, VIPRewardTransform, VIPTransform
from rl_transforms._env import TransformedEnv
from rl_transforms._expand_as import ExpandAs
from rl_transforms._flow import (
    ConditionalSkip,
    EndOfLifeTransform,
    FrameSkipTransform,
    NoopResetEnv,
)
from rl_transforms._hash import Hash
from rl_transforms._image import CenterCrop, Crop, GrayScale, Resize, ToTensorImage
from rl_transforms._kl_reward import KLRewardTransform
from rl_transforms._multi_action import MultiAction
from rl_transforms._multistep import MultiStepTransform
from rl_transforms._normalization import VecNorm, VecNormV2
from rl_transforms._observation_norm import ObservationNorm
from rl_transforms._policy_switch import ConditionalPolicySwitch
from rl_transforms._primer import TensorDictPrimer, gSDENoise
from rl_transforms._rb import RandomCropTensorDict
from rl_transforms._recorders import PixelRenderTransform, TensorDictRecorder, VideoRecorder
from rl_transforms._reward import (
    BinarizeReward,
    LineariseRewards,
    Reward2GoTransform,
    RewardClipping,
    RewardScaling,
)
from rl_transforms._selection import (
    ExcludeTransform,
    RemoveEmptySpecs,
    RenameTransform,
    SelectTransform,
)
from rl_transforms._shape import (
    CatTensors,
    FlattenObservation,
    PermuteTransform,
    SqueezeTransform,
    Stack,
    UnsqueezeTransform,
)
from rl_transforms._temporal import CatFrames, TimeMaxPool
from rl_transforms._timer import Timer
from rl_transforms._tokenizer import Tokenizer
from rl_transforms._trajectories import TrajCounter

__version__ = "0.1.0"

__all__: list[str] = [
    "ActionDiscretizer",
    "ActionMask",
    "AutoResetEnv",
    "AutoResetTransform",
    "BatchSizeTransform",
    "auto_unwrap_transformed_env",
    "BinarizeReward",
    "BurnInTransform",
    "CatFrames",
    "CatTensors",
    "CenterCrop",
    "ClipTransform",
    "Compose",
    "ConditionalPolicySwitch",
    "ConditionalSkip",
    "Crop",
    "DeviceCastTransform",
    "DiscreteActionProjection",
    "DoubleToFloat",
    "DTypeCastTransform",
    "EndOfLifeTransform",
    "ExcludeTransform",
    "ExpandAs",
    "FiniteTensorDictCheck",
    "FlattenObservation",
    "FrameSkipTransform",
    "GrayScale",
    "Hash",
    "gSDENoise",
    "InitTracker",
    "KLRewardTransform",
    "LineariseRewards",
    "MultiAction",
    "MultiStepTransform",
    "NoopResetEnv",
    "ObservationNorm",
    "ObservationTransform",
    "PermuteTransform",
    "PinMemoryTransform",
    "PixelRenderTransform",
    "R3MTransform",
    "RandomCropTensorDict",
    "RemoveEmptySpecs",
    "RenameTransform",
    "Resize",
    "Reward2GoTransform",
    "RewardClipping",
    "RewardScaling",
    "RewardSum",
    "SelectTransform",
    "set_auto_unwrap_transformed_env",
    "SignTransform",
    "SqueezeTransform",
    "Stack",
    "StepCounter",
    "TargetReturn",
    "TensorDictRecorder",
    "TensorDictPrimer",
    "TimeMaxPool",
    "Timer",
    "ToTensorImage",
    "Tokenizer",
    "TrajCounter",
    "Transform",
    "TransformedEnv",
    "UnaryTransform",
    "UnsqueezeTransform",
    "VC1Transform",
    "VecNorm",
    "VecNormV2",
    "VIPRewardTransform",
    "VIPTransform",
    "VideoRecorder",
]
