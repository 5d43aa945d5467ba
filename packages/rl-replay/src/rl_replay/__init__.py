"""Replay buffers, storages, samplers, writers and checkpointers."""

from __future__ import annotations

from rl_replay._buffer import ReplayBuffer
from rl_replay._ensemble import ReplayBufferEnsemble, StorageEnsemble, WriterEnsemble
from rl_replay._multistep import MultiStep
from rl_replay._ted import Flat2TED, Nested2TED, TED2Flat, TED2Nested
from rl_replay._ted_h5 import H5Combine, H5Split
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
    "Flat2TED",
    "FlatStorageCheckpointer",
    "H5Combine",
    "H5Split",
    "H5StorageCheckpointer",
    "ImmutableDatasetWriter",
    "LazyMemmapStorage",
    "LazyTensorStorage",
    "ListStorage",
    "ListStorageCheckpointer",
    "MultiStep",
    "Nested2TED",
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
    "TED2Flat",
    "TED2Nested",
    "TensorDictMaxValueWriter",
    "TensorDictPrioritizedReplayBuffer",
    "TensorDictReplayBuffer",
    "TensorDictRoundRobinWriter",
    "TensorStorage",
    "TensorStorageCheckpointer",
    "Writer",
    "WriterEnsemble",
]
