"""rl_stack.envs and rl_stack.data re-export every public name of the distributions below."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import rl_stack

ENV_SIDE = ("rl_envs_core", "rl_transforms", "rl_batched_envs", "rl_env_adapters")
DATA_SIDE = ("rl_specs", "rl_replay", "rl_datasets")


@pytest.mark.parametrize(
    ("facade", "module_name"),
    [("envs", m) for m in ENV_SIDE] + [("data", m) for m in DATA_SIDE],
)
def test_facade_reexports_the_same_objects(facade, module_name):
    module = importlib.import_module(module_name)
    namespace = getattr(rl_stack, facade)
    for name in module.__all__:
        assert getattr(namespace, name) is getattr(module, name), name
        assert name in namespace.__all__


@pytest.mark.parametrize("facade", ["envs", "data"])
def test_facade_has_no_duplicate_names(facade):
    names = getattr(rl_stack, facade).__all__
    assert len(names) == len(set(names))


TORCHRL_PATHS = [
    "rl_stack.envs.libs",
    "rl_stack.envs.libs.gym",
    "rl_stack.envs.libs.envpool",
    "rl_stack.envs.transforms",
    "rl_stack.envs.transforms.transforms",
    "rl_stack.envs.utils",
    "rl_stack.envs.common",
    "rl_stack.envs.gym_like",
    "rl_stack.envs.batched_envs",
    "rl_stack.envs.async_envs",
    "rl_stack.envs.env_creator",
    "rl_stack.envs.custom",
    "rl_stack.envs.model_based",
    "rl_stack.data.tensor_specs",
    "rl_stack.data.replay_buffers",
    "rl_stack.data.replay_buffers.replay_buffers",
    "rl_stack.data.replay_buffers.samplers",
    "rl_stack.data.replay_buffers.storages",
    "rl_stack.data.replay_buffers.writers",
    "rl_stack.data.replay_buffers.checkpointers",
    "rl_stack.data.datasets",
    "rl_stack.data.postprocs",
    "rl_stack.data.map",
    "rl_stack.record.recorder",
    "rl_stack.record.loggers",
    "rl_stack.record.loggers.common",
    "rl_stack.record.loggers.csv",
    "rl_stack.record.loggers.tensorboard",
    "rl_stack.record.loggers.wandb",
    "rl_stack.record.loggers.mlflow",
    "rl_stack.record.loggers.utils",
    "rl_stack.collectors.collectors",
    "rl_stack.collectors.utils",
    "rl_stack.collectors.distributed",
]


@pytest.mark.parametrize("path", TORCHRL_PATHS)
def test_torchrl_module_path_reexports_facade_objects(path):
    """Each TorchRL-style submodule holds only objects its top-level facade also exports."""
    module = importlib.import_module(path)
    facade = importlib.import_module(".".join(path.split(".")[:2]))
    assert module.__all__, path
    for name in module.__all__:
        assert getattr(module, name) is getattr(facade, name), f"{path}.{name}"


def test_envs_submodules_are_attributes_after_importing_the_facade():
    import rl_stack.envs

    assert rl_stack.envs.libs.gym.GymEnv is rl_stack.envs.GymEnv
    assert rl_stack.envs.utils.step_mdp is rl_stack.envs.step_mdp
    assert rl_stack.envs.make_composite_from_td is rl_stack.data.make_composite_from_td


def test_record_facade_reexports_the_recorders_and_every_logger():
    import rl_stack.record
    import rl_transforms
    import rl_transforms.loggers

    for name in rl_transforms.loggers.__all__:
        assert getattr(rl_stack.record, name) is getattr(rl_transforms.loggers, name), name
    for name in ("VideoRecorder", "TensorDictRecorder", "PixelRenderTransform"):
        assert getattr(rl_stack.record, name) is getattr(rl_transforms, name), name
        assert getattr(rl_stack.envs, name) is getattr(rl_transforms, name), name
    assert rl_stack.record.loggers.csv.CSVLogger is rl_stack.record.CSVLogger


def test_collectors_facade_reexports_the_collectors_and_random_policy():
    import rl_batched_envs.collectors
    import rl_envs_core
    import rl_stack.collectors

    for name in rl_batched_envs.collectors.__all__:
        assert getattr(rl_stack.collectors, name) is getattr(rl_batched_envs, name), name
        assert name in rl_stack.collectors.__all__
    assert rl_stack.collectors.RandomPolicy is rl_envs_core.RandomPolicy
    assert rl_stack.collectors.Collector is rl_stack.collectors.SyncDataCollector


def test_envs_facades_reexport_the_step_and_encoder_transforms():
    import rl_stack.envs
    import rl_stack.envs.transforms
    import rl_transforms

    names = (
        "BatchSizeTransform",
        "BurnInTransform",
        "KLRewardTransform",
        "MultiAction",
        "R3MTransform",
        "VC1Transform",
        "VIPRewardTransform",
        "VIPTransform",
    )
    for name in names:
        assert getattr(rl_stack.envs, name) is getattr(rl_transforms, name), name
        assert getattr(rl_stack.envs.transforms, name) is getattr(rl_transforms, name), name


def test_ray_names_are_reexported_without_importing_ray():
    code = (
        "import sys, rl_stack.data, rl_stack.collectors, rl_stack.collectors.distributed as d, "
        "rl_replay, rl_batched_envs\n"
        "assert rl_stack.data.RayReplayBuffer is rl_replay.RayReplayBuffer\n"
        "for name in ('MinSize', 'SampleToInsertRatio', 'Queue', 'RateLimitTimeoutError'):\n"
        "    assert getattr(rl_stack.data, name) is getattr(rl_replay, name)\n"
        "assert rl_stack.collectors.RayCollector is d.RayCollector is rl_batched_envs.RayCollector\n"
        "print('ray' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
