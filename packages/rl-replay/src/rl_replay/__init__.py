"""Replay buffers, storages, samplers, writers and checkpointers."""

from __future__ import annotations

from rl_replay._buffer import ReplayBuffer
from rl_replay._ensemble import ReplayBufferEnsemble, StorageEnsemble, WriterEnsemble
from rl_replay._rate_limiters import (
    MinSize,
    Queue,
    RateLimiter,
    RateLimitTimeoutError,
    SampleToInsertRatio,
)
from rl_replay._ray_backend import ReplayActorDiedError
from rl_replay._ray_buffer import RayReplayBuffer
from rl_replay._tensordict_buffers import (
    PrioritizedReplayBuffer,
    TensorDictPrioritizedReplayBuffer,
    TensorDictReplayBuffer,
)
from rl_replay.checkpointers import (
    FlatStorageCheckpointer,
    H5StorageCheckpointer,
    ListStorageCheckpointer,
    NestedStorageCheckpointer,
    StorageCheckpointerBase,
    StorageEnsembleCheckpointer,
    TensorStorageCheckpointer,
)
from rl_replay.samplers import (
    PrioritizedSampler,
    PrioritizedSliceSampler,
    RandomSampler,
    Sampler,
    SamplerEnsemble,
    SamplerWithoutReplacement,
    SliceSampler,
    SliceSamplerWithoutReplacement,
)
from rl_replay.storages import (
    LazyMemmapStorage,
    LazyTensorStorage,
    ListStorage,
    Storage,
    TensorStorage,
)
from rl_replay.writers import (
    ImmutableDatasetWriter,
    RoundRobinWriter,
    TensorDictMaxValueWriter,
    TensorDictRoundRobinWriter,
    Writer,
)

__version__ = "0.1.0"

__all__ = [
    "RayReplayBuffer",
    "ReplayActorDiedError",
    "SampleToInsertRatio",
    "RateLimitTimeoutError",
    "RateLimiter",
    "Queue",
    "MinSize",
    "FlatStorageCheckpointer",
    "H5StorageCheckpointer",
    "ImmutableDatasetWriter",
    "LazyMemmapStorage",
    "LazyTensorStorage",
    "ListStorage",
    "ListStorageCheckpointer",
    "NestedStorageCheckpointer",
    "PrioritizedReplayBuffer",
    "PrioritizedSampler",
    "PrioritizedSliceSampler",
    "RandomSampler",
    "ReplayBuffer",
    "ReplayBufferEnsemble",
    "RoundRobinWriter",
    "Sampler",
    "SamplerEnsemble",
    "SamplerWithoutReplacement",
    "SliceSampler",
    "SliceSamplerWithoutReplacement",
    "Storage",
    "StorageCheckpointerBase",
    "StorageEnsemble",
    "StorageEnsembleCheckpointer",
    "TensorDictMaxValueWriter",
    "TensorDictPrioritizedReplayBuffer",
    "TensorDictReplayBuffer",
    "TensorDictRoundRobinWriter",
    "TensorStorage",
    "TensorStorageCheckpointer",
    "Writer",
    "WriterEnsemble",
]
