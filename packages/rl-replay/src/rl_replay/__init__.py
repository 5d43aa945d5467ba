"""Replay buffers, storages, samplers, writers and checkpointers."""

from __future__ import annotations

from rl_replay._buffer import ReplayBuffer
from rl_replay._ensemble import ReplayBufferEnsemble, StorageEnsemble, WriterEnsemble
from rl_replay._multistep import MultiStep
from rl_replay._rate_limiters import (
    MinSize,
    Queue,
    RateLimiter,
    RateLimitTimeoutError,
    SampleToInsertRatio,
)
from rl_replay._ray_backend import ReplayActorDiedError
from rl_replay._ray_buffer import RayReplayBuffer
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
from rl_replay.map import (
    BinaryToDecimal,
    HashToInt,
    MCTSForest,
    QueryModule,
    RandomProjectionHash,
    SipHash,
    TensorDictMap,
    TensorMap,
    Tree,
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
    "BinaryToDecimal",
    "Flat2TED",
    "RayReplayBuffer",
    "ReplayActorDiedError",
    "SampleToInsertRatio",
    "RateLimitTimeoutError",
    "RateLimiter",
    "Queue",
    "MinSize",
    "FlatStorageCheckpointer",
    "H5Combine",
    "H5Split",
    "H5StorageCheckpointer",
    "HashToInt",
    "ImmutableDatasetWriter",
    "LazyMemmapStorage",
    "LazyTensorStorage",
    "ListStorage",
    "ListStorageCheckpointer",
    "MCTSForest",
    "MultiStep",
    "Nested2TED",
    "NestedStorageCheckpointer",
    "PrioritizedReplayBuffer",
    "PrioritizedSampler",
    "PrioritizedSliceSampler",
    "QueryModule",
    "RandomProjectionHash",
    "RandomSampler",
    "ReplayBuffer",
    "ReplayBufferEnsemble",
    "RoundRobinWriter",
    "Sampler",
    "SamplerEnsemble",
    "SamplerWithoutReplacement",
    "SipHash",
    "SliceSampler",
    "SliceSamplerWithoutReplacement",
    "Storage",
    "StorageCheckpointerBase",
    "StorageEnsemble",
    "StorageEnsembleCheckpointer",
    "TED2Flat",
    "TED2Nested",
    "TensorDictMap",
    "TensorDictMaxValueWriter",
    "TensorDictPrioritizedReplayBuffer",
    "TensorDictReplayBuffer",
    "TensorDictRoundRobinWriter",
    "TensorMap",
    "TensorStorage",
    "TensorStorageCheckpointer",
    "Tree",
    "Writer",
    "WriterEnsemble",
]
