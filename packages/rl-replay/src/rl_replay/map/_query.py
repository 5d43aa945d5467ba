"""The :class:`QueryModule`: tensordict entries -> a hash and an integer index."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Sequence

import torch
from tensordict import TensorDictBase, unravel_key
from tensordict.nn import TensorDictModuleBase
from tensordict.utils import NestedKey

from rl_replay.map._hash import HashToInt, SipHash

__all__ = ["QueryModule"]

Hasher = Callable[[torch.Tensor], torch.Tensor]


class QueryModule(TensorDictModuleBase):
    """A Module to generate compatible indices for storage.

    Reads ``in_keys``, hashes each entry row by row (``hash_module``), combines the
    hashes of several keys (``aggregator``) and turns the result into a
    contiguous integer index (``hash_to_int``), written at ``index_key``; the
    hash is written at ``hash_key``.

    Args:
        in_keys (list of NestedKey): the entries that identify an item.
        index_key (NestedKey, optional): where the index is written. Defaults to ``"_index"``.
        hash_key (NestedKey, optional): where the hash is written. Defaults to ``"_hash"``.

    Keyword Args:
        hash_module (callable or list of callables, optional): one hash per key, or
            one module copied for each key. Defaults to :class:`SipHash`.
        hash_to_int (callable, optional): maps hashes to indices. Defaults to
            :class:`HashToInt`.
        aggregator (callable, optional): hashes the ``[batch, len(in_keys)]``
            stack of hashes. Defaults to ``hash_module`` when one module is given,
            else :class:`SipHash`.
        clone (bool, optional): return a shallow copy of the input rather than
            writing into it. Defaults to ``False``.

    Raises:
        ValueError: if ``in_keys`` is empty or the number of hash modules differs
            from the number of keys.
        KeyError: if an input lacks one of the ``in_keys``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> query = QueryModule(in_keys=["key1", "key2"], index_key="index")
        >>> td = TensorDict({"key1": torch.tensor([[1.0], [1], [2]]),
        ...                  "key2": torch.tensor([[3.0], [3], [3]])}, [3])
        >>> query(td)["index"]
        tensor([0, 0, 1])
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | NestedKey,
        index_key: NestedKey = "_index",
        hash_key: NestedKey = "_hash",
        *,
        hash_module: Hasher | Sequence[Hasher] | None = None,
        hash_to_int: Callable[..., torch.Tensor] | None = None,
        aggregator: Hasher | None = None,
        clone: bool = False,
    ) -> None:
        super().__init__()
        keys = [in_keys] if isinstance(in_keys, (str, tuple)) else list(in_keys)
        if not keys:
            raise ValueError(
                "QueryModule expected at least one in_key, got []. Pass the keys to hash."
            )
        self.in_keys = [unravel_key(k) for k in keys]
        self.index_key = unravel_key(index_key)
        self.hash_key = unravel_key(hash_key)
        self.out_keys = [self.index_key, self.hash_key]
        if aggregator is not None and len(self.in_keys) == 1:
            warnings.warn(
                "QueryModule got an aggregator but reads a single key; the aggregator is unused.",
                UserWarning,
                stacklevel=2,
            )
        if aggregator is None:
            single = hash_module is not None and not isinstance(hash_module, (list, tuple))
            aggregator = hash_module if single else SipHash()
        if hash_module is None:
            modules: list[Hasher] = [SipHash() for _ in self.in_keys]
        elif isinstance(hash_module, (list, tuple)):
            if len(hash_module) != len(self.in_keys):
                raise ValueError(
                    f"QueryModule expected one hash module per in_key ({len(self.in_keys)}), got "
                    f"{len(hash_module)}. Pass a single module or one per key."
                )
            modules = list(hash_module)
        else:
            modules = [
                copy.deepcopy(hash_module) if len(self.in_keys) > 1 else hash_module
                for _ in self.in_keys
            ]
        self.hash_module: dict[NestedKey, Hasher] = dict(zip(self.in_keys, modules, strict=True))
        self.aggregator = aggregator
        self.hash_to_int = HashToInt() if hash_to_int is None else hash_to_int
        self.clone = clone

    def hash(self, tensordict: TensorDictBase) -> torch.Tensor:
        """The ``[batch]`` int64 hash of each item of ``tensordict``."""
        hashes = []
        for key in self.in_keys:
            if key not in tensordict.keys(True):
                raise KeyError(
                    f"QueryModule expected the entry {key!r} in the query, found "
                    f"{sorted(map(str, tensordict.keys(True, True)))}. Add it to the query."
                )
            value = tensordict.get(key)
            if not tensordict.batch_dims:
                value = value.unsqueeze(0)
            hashes.append(self.hash_module[key](value.reshape(value.shape[0], -1)))
        if len(hashes) == 1:
            out = hashes[0]
        else:
            out = self.aggregator(torch.stack(hashes, -1))
        return out.reshape(tensordict.batch_size)

    def forward(
        self,
        tensordict: TensorDictBase,
        *,
        extend: bool = True,
        write_hash: bool = True,
        clone: bool | None = None,
    ) -> TensorDictBase:
        hashes = self.hash(tensordict)
        index = self.hash_to_int(hashes, extend=extend)
        clone = self.clone if clone is None else clone
        out = tensordict.copy() if clone else tensordict
        out.set(self.index_key, index)
        if write_hash:
            out.set(self.hash_key, hashes)
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}(in_keys={self.in_keys}, index_key={self.index_key!r})"
