"""Maps and trees for search: hashing modules, :class:`QueryModule`, :class:`TensorDictMap`,
:class:`Tree` and :class:`MCTSForest`."""

from __future__ import annotations

from rl_replay.map._forest import MCTSForest
from rl_replay.map._hash import BinaryToDecimal, HashToInt, RandomProjectionHash, SipHash
from rl_replay.map._query import QueryModule
from rl_replay.map._tdmap import TensorDictMap, TensorMap
from rl_replay.map._tree import Tree

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
