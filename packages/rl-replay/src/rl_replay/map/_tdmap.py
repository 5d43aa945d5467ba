"""Maps from tensordict keys to stored tensordicts: :class:`TensorMap` and :class:`TensorDictMap`."""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase, unravel_key
from tensordict.nn import TensorDictModuleBase
from tensordict.utils import NestedKey

from rl_replay.map._query import QueryModule
from rl_replay.storages import LazyTensorStorage, ListStorage, Storage

__all__ = ["TensorDictMap", "TensorMap"]


class TensorMap(abc.ABC):
    """An Abstraction for implementing different storage.

    A map whose keys and values are tensors or tensordicts: subclasses implement
    ``__getitem__``, ``__setitem__``, ``__len__``, ``contains`` and ``clear``;
    ``item in map`` is ``map.contains(item).all()``.
    """

    @abc.abstractmethod
    def clear(self) -> None:
        """Empties the map."""

    @abc.abstractmethod
    def __getitem__(self, item: Any) -> Any:  # Any: a key of the map
        ...

    @abc.abstractmethod
    def __setitem__(self, key: Any, value: Any) -> None:  # Any: a key/value of the map
        ...

    @abc.abstractmethod
    def __len__(self) -> int: ...

    @abc.abstractmethod
    def contains(self, item: Any) -> torch.Tensor:  # Any: a key of the map
        """A boolean tensor: whether each key of ``item`` is in the map."""

    def __contains__(self, item: Any) -> bool:  # Any: a key of the map
        return bool(self.contains(item).all())


class TensorDictMap(TensorDictModuleBase, TensorMap):
    """A Map-Storage for TensorDict.

    Keys are the ``in_keys`` entries of a tensordict (hashed to an index by the
    ``query_module``); values are tensordicts kept in any of our storages.
    ``map[td] = value`` writes (new keys get new slots, existing keys are
    overwritten, or merged through ``write_fn``), ``map[td]`` reads, and
    ``map.contains(td)`` tells which keys are present. ``map[index]`` with an
    integer tensor reads storage slots directly.

    Keyword Args:
        query_module (QueryModule): maps the key entries to a storage index.
        storage (Storage): where the values live (e.g. ``LazyTensorStorage(n)`` or
            ``ListStorage(n)``).
        collate_fn (callable, optional): turns what the storage returns into a
            tensordict. Defaults to a lazy stack for :class:`~rl_replay.ListStorage`
            and the identity otherwise.
        out_keys (list of NestedKey, optional): the value entries stored. Defaults to
            ``None`` (all the entries of the first written value).
        write_fn (callable, optional): ``write_fn(new, old=None)`` returns what is
            stored: ``old`` is the stored value when the key already exists.
            Defaults to ``None`` (overwrite).

    Raises:
        KeyError: on reading keys that are not in the map, listing how many.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rl_replay import LazyTensorStorage
        >>> query = QueryModule(in_keys=["key1", "key2"], index_key="index")
        >>> tdmap = TensorDictMap(query_module=query, storage=LazyTensorStorage(1000))
        >>> keys = TensorDict({"key1": torch.tensor([[-1.0], [1], [3]]),
        ...                    "key2": torch.tensor([[0.0], [2], [4]])}, [3])
        >>> tdmap[keys] = TensorDict({"out": torch.tensor([[10.0], [20], [30]])}, [3])
        >>> tdmap[keys[1:]]["out"]
        tensor([[20.],
                [30.]])
        >>> tdmap.contains(TensorDict({"key1": torch.tensor([[1.0], [9]]),
        ...                            "key2": torch.tensor([[2.0], [9]])}, [2]))
        tensor([ True, False])
    """

    def __init__(
        self,
        *,
        query_module: QueryModule,
        storage: Storage,
        collate_fn: Callable[[Any], Any] | None = None,  # Any: what the storage returns
        out_keys: Sequence[NestedKey] | None = None,
        write_fn: Callable[..., TensorDictBase] | None = None,
    ) -> None:
        super().__init__()
        self.in_keys = query_module.in_keys
        if out_keys is not None:
            self.out_keys = [unravel_key(k) for k in out_keys]
        self.query_module = query_module
        self.index_key = query_module.index_key
        self.storage = storage
        if collate_fn is None:
            collate_fn = _lazy_stack if isinstance(storage, ListStorage) else _identity
        self.collate_fn = collate_fn
        self.write_fn = write_fn
        self._filled = torch.zeros(0, dtype=torch.bool)

    @property
    def max_size(self) -> int:
        """The storage's capacity."""
        return self.storage.max_size

    @classmethod
    def from_tensordict_pair(
        cls,
        source: TensorDictBase,
        dest: TensorDictBase,
        in_keys: Sequence[NestedKey],
        out_keys: Sequence[NestedKey] | None = None,
        max_size: int = 1000,
        storage_constructor: Callable[..., Storage] | None = None,
        hash_module: Callable[[torch.Tensor], torch.Tensor] | None = None,
        collate_fn: Callable[[Any], Any] | None = None,  # Any: what the storage returns
        write_fn: Callable[..., TensorDictBase] | None = None,
        consolidated: bool | None = None,
    ) -> TensorDictMap:
        """Builds a map keyed by ``in_keys`` of ``source`` holding ``dest``-like values.

        Args:
            source (TensorDictBase): an example key tensordict.
            dest (TensorDictBase): an example value tensordict.
            in_keys (list of NestedKey): the key entries.
            out_keys (list of NestedKey, optional): the stored value entries.
                Defaults to ``None`` (all).
            max_size (int, optional): the capacity. Defaults to ``1000``.
            storage_constructor (callable, optional): builds the storage from
                ``max_size``. Defaults to :class:`~rl_replay.LazyTensorStorage`.
            hash_module (callable, optional): the hash of the query. Defaults to
                :class:`SipHash`.
            collate_fn (callable, optional): see the class. Defaults to ``None``.
            write_fn (callable, optional): see the class. Defaults to ``None``.
            consolidated (bool, optional): accepted for API compatibility. Defaults to ``None``.

        Raises:
            KeyError: if ``source`` lacks one of ``in_keys``.
        """
        for key in in_keys:
            if unravel_key(key) not in source.keys(True):
                raise KeyError(
                    f"TensorDictMap.from_tensordict_pair expected the key entry {key!r} in source, "
                    f"found {sorted(map(str, source.keys(True, True)))}."
                )
        query = QueryModule(in_keys=list(in_keys), hash_module=hash_module)
        storage = (storage_constructor or LazyTensorStorage)(max_size)
        return cls(
            query_module=query,
            storage=storage,
            collate_fn=collate_fn,
            out_keys=out_keys,
            write_fn=write_fn,
        )

    # ------------------------------------------------------------ indices
    def _index(self, item: TensorDictBase, extend: bool) -> torch.Tensor:
        return self.query_module(item, extend=extend, write_hash=False, clone=True).get(
            self.index_key
        )

    def _present(self, index: torch.Tensor) -> torch.Tensor:
        ok = (index >= 0) & (index < self._filled.numel())
        out = torch.zeros_like(index, dtype=torch.bool)
        out[ok] = self._filled[index[ok]]
        return out

    def contains(self, item: TensorDictBase) -> torch.Tensor:
        """Whether each key of ``item`` (one per batch element) is in the map."""
        if isinstance(item, torch.Tensor):
            return self._present(item)
        single = not item.batch_dims
        index = self._index(item.unsqueeze(0) if single else item, extend=False)
        present = self._present(index)
        return present[0] if single else present

    def __len__(self) -> int:
        return int(self._filled.sum())

    def clear(self) -> None:
        self.storage.empty()
        self._filled = torch.zeros(0, dtype=torch.bool)
        self.query_module.hash_to_int = type(self.query_module.hash_to_int)()

    # ------------------------------------------------------------ read
    def __getitem__(self, item: TensorDictBase | torch.Tensor) -> TensorDictBase:
        if isinstance(item, torch.Tensor):
            return self._read(item, what="slots")
        single = not item.batch_dims
        index = self._index(item.unsqueeze(0) if single else item, extend=False)
        out = self._read(index.reshape(-1), what="keys")
        if item.batch_dims > 1:
            out = out.reshape(item.batch_size)
        return out[0] if single else out

    def _read(self, index: torch.Tensor, what: str) -> TensorDictBase:
        present = self._present(index)
        if not present.all():
            missing = int((~present).sum())
            raise KeyError(
                f"TensorDictMap has no value for {missing} of the {present.numel()} queried {what} "
                f"(in_keys={self.in_keys}). Check map.contains(query) first or write them."
            )
        if index.ndim == 0:
            return self.collate_fn(self.storage.get(int(index)))
        return self.collate_fn(self.storage.get(index))

    # ------------------------------------------------------------ write
    def __setitem__(self, item: TensorDictBase | torch.Tensor, value: TensorDictBase) -> None:
        if getattr(self, "out_keys", None) is not None and isinstance(value, TensorDictBase):
            value = value.select(*self.out_keys, strict=False)
        if isinstance(item, torch.Tensor):
            self._write(item.reshape(-1), value)
            return
        if not item.batch_dims:
            item, value = item.unsqueeze(0), value.unsqueeze(0)
        index = self._index(item, extend=True).reshape(-1)
        if index.numel() and int(index.max()) >= self.max_size:
            raise RuntimeError(
                f"TensorDictMap is full: it holds max_size={self.max_size} keys and got a new one. "
                "Build it with a larger storage."
            )
        value = value.reshape(-1)
        if index.unique().numel() < index.numel():
            for i in range(index.numel()):  # repeated keys: in order, each sees the previous
                self._write(index[i : i + 1], value[i : i + 1])
            return
        self._write(index, value)

    def _write(self, index: torch.Tensor, value: TensorDictBase) -> None:
        if self.write_fn is not None:
            present = self._present(index)
            if present.any():
                merged = [
                    self.write_fn(value[i], self._read(index[i], what="slots"))
                    if present[i]
                    else self.write_fn(value[i])
                    for i in range(index.numel())
                ]
                value = (
                    LazyStackedTensorDict.lazy_stack(merged)
                    if isinstance(self.storage, ListStorage)
                    else torch.stack(merged)
                )
            else:
                value = self.write_fn(value)
        if isinstance(self.storage, ListStorage):
            self.storage.set(index.tolist(), list(value.unbind(0)))
        else:
            self.storage.set(index, value)
        if getattr(self, "out_keys", None) is None and isinstance(value, TensorDictBase):
            self.out_keys = [unravel_key(k) for k in value.keys(True, True)]
        self._mark_written(index)

    def _mark_written(self, index: torch.Tensor) -> None:
        """Records that the storage slots ``index`` hold values."""
        top = int(index.max()) + 1 if index.numel() else 0
        if top > self._filled.numel():
            grown = torch.zeros(max(top, 2 * self._filled.numel()), dtype=torch.bool)
            grown[: self._filled.numel()] = self._filled
            self._filled = grown
        self._filled[index] = True


def _lazy_stack(items: Any) -> Any:  # Any: one stored item or a list of them
    if isinstance(items, list):
        return LazyStackedTensorDict.lazy_stack(items) if items else TensorDict()
    return items


def _identity(items: Any) -> Any:  # Any: what the storage returns
    return items
