"""Maps and trees for search, as ``torchrl.data.map``: re-exports only."""

from __future__ import annotations

from rl_replay import (
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

__all__ = [
    "BinaryToDecimal",
    "HashToInt",
    "MCTSForest",
    "QueryModule",
    "RandomProjectionHash",
    "SipHash",
    "TensorDictMap",
    "TensorMap",
    "Tree",
]
