"""The public surface of rl_transforms: version metadata and import hygiene."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import rl_transforms

OPTIONAL_BACKENDS = (
    "gymnasium",
    "gym",
    "envpool",
    "h5py",
    "chess",
    "dm_control",
    "pettingzoo",
    "vmas",
    "av",
    "tensorboard",
    "wandb",
    "mlflow",
    "moviepy",
    "tokenizers",
    "transformers",
)


#: The seed's transform names (000 list, 001 autosummary) implemented by this package.
DOCUMENTED = [
    "ActionDiscretizer",
    "ActionMask",
    "AutoResetEnv",
    "AutoResetTransform",
    "BinarizeReward",
    "CatFrames",
    "CatTensors",
    "CenterCrop",
    "ClipTransform",
    "Compose",
    "ConditionalPolicySwitch",
    "ConditionalSkip",
    "Crop",
    "DTypeCastTransform",
    "DeviceCastTransform",
    "DiscreteActionProjection",
    "DoubleToFloat",
    "EndOfLifeTransform",
    "ExcludeTransform",
    "FiniteTensorDictCheck",
    "FlattenObservation",
    "FrameSkipTransform",
    "GrayScale",
    "Hash",
    "InitTracker",
    "LineariseRewards",
    "MultiStepTransform",
    "NoopResetEnv",
    "ObservationNorm",
    "ObservationTransform",
    "RandomCropTensorDict",
    "Reward2GoTransform",
    "PermuteTransform",
    "PinMemoryTransform",
    "PixelRenderTransform",
    "RemoveEmptySpecs",
    "RenameTransform",
    "Resize",
    "RewardClipping",
    "RewardScaling",
    "RewardSum",
    "SelectTransform",
    "SignTransform",
    "SqueezeTransform",
    "Stack",
    "StepCounter",
    "TargetReturn",
    "TensorDictRecorder",
    "TensorDictPrimer",
    "TimeMaxPool",
    "Timer",
    "TrajCounter",
    "ToTensorImage",
    "Tokenizer",
    "Transform",
    "TransformedEnv",
    "UnaryTransform",
    "UnsqueezeTransform",
    "VecNorm",
    "VecNormV2",
    "VideoRecorder",
    "gSDENoise",
    "BatchSizeTransform",
    "BurnInTransform",
    "KLRewardTransform",
    "MultiAction",
    "R3MTransform",
    "VC1Transform",
    "VIPRewardTransform",
    "VIPTransform",
    # in TorchRL's transforms reference, outside the seed's list
    "ExpandAs",
    # TorchRL's top-level switch for nested TransformedEnv (torchrl.set_auto_unwrap_transformed_env)
    "auto_unwrap_transformed_env",
    "set_auto_unwrap_transformed_env",
]

#: torchrl.record.loggers' documented names (trainers_loggers reference page).
DOCUMENTED_LOGGERS = [
    "CSVLogger",
    "Logger",
    "MLFlowLogger",
    "TensorboardLogger",
    "WandbLogger",
    "generate_exp_name",
    "get_logger",
]


def test_all_is_pinned_to_the_documented_names():
    assert sorted(rl_transforms.__all__) == sorted(DOCUMENTED)


def test_loggers_all_is_pinned_to_the_documented_names():
    import rl_transforms.loggers

    assert sorted(rl_transforms.loggers.__all__) == sorted(DOCUMENTED_LOGGERS)
    assert all(hasattr(rl_transforms.loggers, name) for name in DOCUMENTED_LOGGERS)


def test_version_matches_distribution_metadata():
    assert rl_transforms.__version__ == metadata.version("rl-transforms")


def test_all_names_resolve():
    missing = [name for name in rl_transforms.__all__ if not hasattr(rl_transforms, name)]
    assert missing == []


def test_import_loads_no_optional_backend():
    code = (
        "import sys, rl_transforms, rl_transforms.loggers; "
        f"print([m for m in {OPTIONAL_BACKENDS!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
