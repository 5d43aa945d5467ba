"""TED converters: :class:`TED2Flat` / :class:`Flat2TED` and :class:`TED2Nested` / :class:`Nested2TED`.

In TED data, ``("next", key)`` of a step is ``key`` of the step after it, except
where a trajectory ends. The flat layout keeps every entry except those duplicated
``"next"`` entries, plus, for each duplicated key, the ``"next"`` values that
cannot be recovered from the following step ("ends": trajectory ends -- done
entries -- and any step whose ``"next"`` value differs from its successor, such as
the newest one). Rebuilding shifts the root values one step and writes the ends
back, so the round trip is exact even where the assumptions about the done state
do not hold (they only cost space then).

Steps follow each other along dim 0 (time, the storage's cursor dim); more batch
dims (one column per environment) may follow. A full circular storage wraps
around: its newest row is followed by its oldest.

The flat form is a tensordict with an empty batch size::

    data/...            every kept entry, with the TED's batch size
    ends/<n>_index      flat positions (over the batch dims) of the stored ends
    ends/<n>_value      the ("next", key) values at those positions
    duplicated          the duplicated keys, in the order of <n>   (non-tensor)
    shift, is_full      the storage cursor and fullness, when known (non-tensor)

The nested form replaces ``data`` with nested tensors whose rows are the
trajectories (cut after each end, column by column) and adds ``lengths`` and the
TED's ``shape``; non-tensor leaves stay in ``non_tensor`` with the TED's batch size.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey

from rl_replay._leaves import as_tuple, leaf_keys
from rl_replay._multistep import DEFAULT_DONE_KEYS

__all__ = [
    "Flat2TED",
    "Nested2TED",
    "TED2Flat",
    "TED2Nested",
    "flat_to_ted",
    "kept_from_nested",
    "nested_from_kept",
    "ted_to_flat",
    "trajectory_ends",
]

NEXT = "next"


# ---------------------------------------------------------------- the one implementation
def trajectory_ends(
    data: TensorDictBase, done_keys: Sequence[tuple[str, ...]], full: bool
) -> torch.Tensor:
    """Boolean mask (the batch shape) of the steps after which a trajectory stops."""
    stop = torch.zeros(data.batch_size, dtype=torch.bool)
    keys = set(leaf_keys(data))
    for key in done_keys:
        if (NEXT, *key) in keys:
            flag = data.get((NEXT, *key))
            stop |= flag.reshape(*data.batch_size, -1).any(-1)
    if data.batch_size[0] and not full:
        stop[-1] = True  # the newest row has no successor
    return stop


def duplicated_keys(
    data: TensorDictBase,
    done_keys: Sequence[tuple[str, ...]],
    reward_keys: Sequence[tuple[str, ...]],
) -> list[tuple[str, ...]]:
    """The ``"next"`` tensor entries that repeat a root entry of the same shape and dtype."""
    if NEXT not in data.keys():
        return []
    root = {k for k in data.keys(True, True) if as_tuple(k)[0] != NEXT}
    root = {as_tuple(k) for k in root}
    skip = set(done_keys) | set(reward_keys)
    out = []
    for key in data.get(NEXT).keys(True, True):
        key = as_tuple(key)
        if key in skip or key not in root:
            continue
        current, following = data.get(key), data.get((NEXT, *key))
        if current.shape == following.shape and current.dtype == following.dtype:
            out.append(key)
    return out


def ted_to_flat(
    data: TensorDictBase,
    *,
    done_keys: Sequence[tuple[str, ...]] = tuple((k,) for k in DEFAULT_DONE_KEYS),
    reward_keys: Sequence[tuple[str, ...]] = (("reward",),),
    full: bool = False,
) -> tuple[TensorDictBase, TensorDict, list[tuple[str, ...]]]:
    """Splits a TED (time along dim 0) into ``(kept, ends, duplicated)``; see the module doc."""
    dup = duplicated_keys(data, done_keys, reward_keys)
    ends: dict[str, torch.Tensor] = {}
    stop = trajectory_ends(data, done_keys, full) if dup else None
    for number, key in enumerate(dup):
        current, following = data.get(key), data.get((NEXT, *key))
        # ("next", key)[t] is recoverable when it equals key[t + 1] (the oldest row
        # follows the newest one in a full circular storage)
        differs = torch.ones(data.batch_size, dtype=torch.bool)
        if data.batch_size[0] > 1:
            differs[:-1] = _rows_differ(following[:-1], current[1:], data.batch_dims)
        differs[-1:] = _rows_differ(following[-1:], current[:1], data.batch_dims)
        positions = (differs | stop).reshape(-1).nonzero().squeeze(-1)
        ends[f"{number}_index"] = positions
        ends[f"{number}_value"] = following.reshape(-1, *following.shape[data.batch_dims :])[
            positions
        ]
    kept = data.exclude(*[(NEXT, *key) for key in dup])
    return kept, TensorDict(ends, batch_size=[]), dup


def flat_to_ted(
    kept: TensorDictBase,
    ends: TensorDictBase,
    duplicated: Sequence[Sequence[str]],
    *,
    copy: bool = False,
) -> TensorDictBase:
    """Rebuilds the TED from the parts :func:`ted_to_flat` returns.

    The kept entries are shared with ``kept`` unless ``copy`` is set.
    """
    data = kept.to_tensordict() if copy else kept.copy()
    for number, key in enumerate(duplicated):
        key = tuple(key)
        if f"{number}_index" not in ends.keys():
            raise KeyError(
                f"Flat2TED expected the ends of {key!r} under ('ends', '{number}_index'); found "
                f"{sorted(ends.keys())}. The flat data is incomplete: convert it again with TED2Flat."
            )
        current = data.get(key)
        following = torch.empty_like(current)
        following[:-1] = current[1:]
        following[-1:] = current[:1]
        flat = following.view(-1, *following.shape[data.batch_dims :])
        index = ends.get(f"{number}_index")
        if index.numel() and (int(index.min()) < 0 or int(index.max()) >= flat.shape[0]):
            raise ValueError(
                f"Flat2TED expected the end positions of {key!r} in [0, {flat.shape[0]}), found "
                f"[{int(index.min())}, {int(index.max())}]. The flat data is corrupt."
            )
        flat[index] = ends.get(f"{number}_value")
        data.set((NEXT, *key), following)
    return data


def _rows_differ(a: torch.Tensor, b: torch.Tensor, batch_dims: int) -> torch.Tensor:
    """Per batch element: whether the two tensors differ anywhere (bitwise, so NaNs match)."""
    shape = a.shape[:batch_dims]
    a2, b2 = a.reshape(shape.numel(), -1), b.reshape(shape.numel(), -1)
    if a2.numel() and all(t.is_contiguous() and t.stride(-1) == 1 for t in (a2, b2)):
        row_bytes = a2.shape[1] * a2.element_size()
        for dtype, size in ((torch.int64, 8), (torch.int32, 4), (torch.uint8, 1)):
            aligned = all(t.storage_offset() * t.element_size() % size == 0 for t in (a2, b2))
            if row_bytes % size == 0 and aligned:
                a2 = a2.view(torch.uint8).view(dtype)
                b2 = b2.view(torch.uint8).view(dtype)
                break
    return (a2 != b2).any(-1).reshape(shape)


def nested_from_kept(
    kept: TensorDictBase, stop: torch.Tensor
) -> tuple[TensorDict, list[list[int]]]:
    """Cuts the kept entries into one nested row per trajectory (column by column)."""
    rows = kept.batch_size[0]
    columns = stop.reshape(rows, -1).T
    lengths = []
    for column in columns:
        cuts = (column.nonzero().squeeze(-1) + 1).tolist()
        bounds = [0, *[c for c in cuts if c < rows], rows]
        lengths.append([b - a for a, b in itertools.pairwise(bounds)])
    nested = {}
    for key, tensor in kept.items(True, True):
        per_column = tensor.reshape(rows, -1, *tensor.shape[kept.batch_dims :]).transpose(0, 1)
        pieces = [
            piece
            for column, sizes in zip(per_column, lengths, strict=True)
            for piece in column.split(sizes)
        ]
        with warnings.catch_warnings():  # the strided nested layout is what tensordict memmaps
            warnings.simplefilter("ignore", UserWarning)
            nested[key] = torch.nested.nested_tensor(pieces)
    count = sum(len(sizes) for sizes in lengths)
    return TensorDict(nested, batch_size=[count]), lengths


def kept_from_nested(
    nested: TensorDictBase, lengths: Sequence[Sequence[int]], shape: Sequence[int]
) -> TensorDict:
    """Inverse of :func:`nested_from_kept`: the kept entries with the TED's batch shape."""
    shape = torch.Size(shape)
    rows = sum(lengths[0]) if lengths else 0
    batch = torch.Size([rows, *shape[1:]])
    flat = {}
    for key, tensor in nested.items(True, True):
        pieces = list(tensor.unbind(0))
        columns, start = [], 0
        for sizes in lengths:
            columns.append(torch.cat(pieces[start : start + len(sizes)]))
            start += len(sizes)
        stacked = torch.stack(columns, 1)  # [rows, B_flat, *tail]
        flat[key] = stacked.reshape(*batch, *stacked.shape[2:])
    return TensorDict(flat, batch_size=batch)


# ---------------------------------------------------------------- the converters
class _Converter:
    """Keys shared by the four converters."""

    _shift: int | None = None
    _is_full: bool | None = None

    def __init__(
        self,
        done_key: NestedKey = (NEXT, "done"),
        shift_key: NestedKey = "shift",
        is_full_key: NestedKey = "is_full",
        done_keys: Sequence[NestedKey] = DEFAULT_DONE_KEYS,
        reward_keys: Sequence[NestedKey] = ("reward",),
    ) -> None:
        self.done_key = as_tuple(done_key)
        self.shift_key = shift_key
        self.is_full_key = is_full_key
        self.done_keys = [as_tuple(k) for k in done_keys]
        self.reward_keys = [as_tuple(k) for k in reward_keys]

    @property
    def shift(self) -> int | None:
        """The storage cursor of the data (written into the flat form when set)."""
        return self._shift

    @shift.setter
    def shift(self, value: int | None) -> None:
        self._shift = value

    @property
    def is_full(self) -> bool | None:
        """Whether the data fills a circular storage (its newest row precedes its oldest)."""
        return self._is_full

    @is_full.setter
    def is_full(self, value: bool | None) -> None:
        self._is_full = value

    def _check_ted(self, data: TensorDictBase) -> None:
        name = type(self).__name__
        if not isinstance(data, TensorDictBase):
            raise TypeError(f"{name} expected a TED tensordict, got {type(data).__name__}.")
        if data.batch_dims == 0:
            raise ValueError(
                f"{name} expected a TED with a time dim (dim 0), got batch_size=[]. "
                "Pass a batch of steps, e.g. a rollout or a storage's content."
            )
        keys = set(leaf_keys(data))
        done_key = self.done_key if self.done_key[0] == NEXT else (NEXT, *self.done_key)
        if NEXT not in data.keys() or done_key not in keys:
            raise KeyError(
                f"{name} expected a TED with a {done_key!r} entry, found keys {sorted(keys)}. "
                "Convert data in the TED layout (with its 'next' entries) or pass done_key=."
            )

    def _metadata(self, out: TensorDict) -> None:
        if self.shift is not None:
            out.set_non_tensor(self.shift_key, int(self.shift))
        if self.is_full is not None:
            out.set_non_tensor(self.is_full_key, bool(self.is_full))


def _get_part(data: TensorDictBase, key: str, name: str, expected: str) -> Any:  # Any: td or value
    if not isinstance(data, TensorDictBase) or key not in data.keys():
        found = sorted(data.keys()) if isinstance(data, TensorDictBase) else type(data).__name__
        raise KeyError(
            f"{name} expected the {expected} with a {key!r} entry, found {found}. "
            f"Pass what {expected.split()[0]} returned."
        )
    if key in ("data", "ends", "non_tensor"):
        return data.get(key)
    return data.get_non_tensor(key)


class TED2Flat(_Converter):
    """A storage saving hook to serialize TED data in a compact format.

    Each observation-like entry is stored once: ``("next", key)`` is dropped
    where it equals ``key`` of the following step, and kept only at trajectory
    ends (see the module doc for the layout). :class:`Flat2TED` is the inverse.
    Time runs along dim 0.

    Args:
        done_key (NestedKey, optional): the done entry a TED must hold.
            Defaults to ``("next", "done")``.
        shift_key (NestedKey, optional): where the storage cursor is written.
            Defaults to ``"shift"``.
        is_full_key (NestedKey, optional): where the fullness flag is written.
            Defaults to ``"is_full"``.
        done_keys (tuple of NestedKey, optional): the ``"next"`` entries that end
            a trajectory. Defaults to ``("done", "terminated", "truncated")``.
        reward_keys (tuple of NestedKey, optional): ``"next"`` entries never
            deduplicated. Defaults to ``("reward",)``.

    Raises:
        KeyError: if the data has no ``"next"`` or no ``done_key`` entry.
        ValueError: if the data has no time dim.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> obs = torch.arange(7.0).unsqueeze(-1).expand(7, 100)
        >>> done = torch.tensor([0, 0, 1, 0, 0, 0], dtype=torch.bool).unsqueeze(-1)
        >>> ted = TensorDict({"obs": obs[:-1], "next": {"obs": obs[1:], "done": done}}, [6])
        >>> flat = TED2Flat()(ted)
        >>> flat["ends", "0_index"]  # the trajectory end and the newest step
        tensor([2, 5])
        >>> bool((Flat2TED()(flat) == ted).all())
        True
    """

    def __call__(self, data: TensorDictBase, path: Any = None) -> TensorDict:  # Any: unused path
        """Returns the flat form of ``data`` (``path`` is accepted for hook compatibility)."""
        self._check_ted(data)
        kept, ends, dup = ted_to_flat(
            data,
            done_keys=self.done_keys,
            reward_keys=self.reward_keys,
            full=bool(self.is_full),
        )
        out = TensorDict({"data": kept, "ends": ends}, batch_size=[])
        out.set_non_tensor("duplicated", [list(k) for k in dup])
        self._metadata(out)
        return out


class Flat2TED(_Converter):
    """A storage loading hook to deserialize flattened TED data to TED format.

    The inverse of :class:`TED2Flat`.

    Args:
        done_key (NestedKey, optional): accepted for symmetry with
            :class:`TED2Flat`. Defaults to ``"done"``.
        shift_key (NestedKey, optional): see :class:`TED2Flat`. Defaults to ``"shift"``.
        is_full_key (NestedKey, optional): see :class:`TED2Flat`. Defaults to ``"is_full"``.
        done_keys (tuple of NestedKey, optional): see :class:`TED2Flat`.
            Defaults to ``("done", "terminated", "truncated")``.
        reward_keys (tuple of NestedKey, optional): see :class:`TED2Flat`.
            Defaults to ``("reward",)``.

    Raises:
        KeyError: if the input is not a :class:`TED2Flat` output.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> obs = torch.arange(4.0)
        >>> ted = TensorDict({"obs": obs[:-1], "next": {"obs": obs[1:],
        ...     "done": torch.zeros(3, 1, dtype=torch.bool)}}, [3])
        >>> Flat2TED()(TED2Flat()(ted))["next", "obs"]
        tensor([1., 2., 3.])
    """

    def __init__(
        self,
        done_key: NestedKey = "done",
        shift_key: NestedKey = "shift",
        is_full_key: NestedKey = "is_full",
        done_keys: Sequence[NestedKey] = DEFAULT_DONE_KEYS,
        reward_keys: Sequence[NestedKey] = ("reward",),
    ) -> None:
        super().__init__(done_key, shift_key, is_full_key, done_keys, reward_keys)

    def __call__(self, data: TensorDictBase, out: TensorDictBase | None = None) -> TensorDictBase:
        """Returns the TED (written into ``out`` too when given)."""
        name = type(self).__name__
        kept = _get_part(data, "data", name, "TED2Flat output")
        ends = _get_part(data, "ends", name, "TED2Flat output")
        dup = _get_part(data, "duplicated", name, "TED2Flat output")
        ted = flat_to_ted(kept, ends, dup)
        if out is not None:
            out.update(ted)
            return out
        return ted


class TED2Nested(TED2Flat):
    """Converts a TED-formatted dataset into a tensordict populated with nested tensors where each row is a trajectory.

    The flat form of :class:`TED2Flat` whose ``data`` holds nested tensors: along
    each environment column (time along dim 0), every row of the nested dim is
    one trajectory, cut after each end. :class:`Nested2TED` is the inverse.

    Args:
        *args: the arguments of :class:`TED2Flat`.
        **kwargs: the keyword arguments of :class:`TED2Flat`.

    Raises:
        KeyError: if the data has no ``"next"`` or no ``done_key`` entry.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> obs = torch.arange(6.0)
        >>> done = torch.tensor([0, 1, 0, 0, 1], dtype=torch.bool).unsqueeze(-1)
        >>> ted = TensorDict({"obs": obs[:-1], "next": {"obs": obs[1:], "done": done}}, [5])
        >>> nested = TED2Nested()(ted)
        >>> [t.tolist() for t in nested["data", "obs"].unbind(0)]
        [[0.0, 1.0], [2.0, 3.0, 4.0]]
        >>> bool((Nested2TED()(nested) == ted).all())
        True
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # Any: TED2Flat's arguments
        super().__init__(*args, **kwargs)

    def __call__(self, data: TensorDictBase, path: Any = None) -> TensorDict:  # Any: unused path
        """Returns the nested form of ``data``."""
        flat = super().__call__(data, path)
        kept = flat.get("data")
        stop = trajectory_ends(data, self.done_keys, bool(self.is_full))
        tensors = kept.exclude(*[k for k in leaf_keys(kept) if k not in set(_tensor_keys(kept))])
        nested, lengths = nested_from_kept(tensors, stop)
        flat.set("data", nested)
        non_tensor = kept.select(*[k for k in leaf_keys(kept) if k not in set(_tensor_keys(kept))])
        flat.set("non_tensor", non_tensor)
        flat.set_non_tensor("lengths", lengths)
        flat.set_non_tensor("shape", list(data.batch_size))
        return flat


def _tensor_keys(data: TensorDictBase) -> list[tuple[str, ...]]:
    return [as_tuple(k) for k in data.keys(True, True)]


class Nested2TED(Flat2TED):
    """Converts a nested tensordict where each row is a trajectory into the TED format.

    The inverse of :class:`TED2Nested`.

    Args:
        *args: the arguments of :class:`Flat2TED`.
        **kwargs: the keyword arguments of :class:`Flat2TED`.

    Raises:
        KeyError: if the input is not a :class:`TED2Nested` output.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> obs = torch.arange(3.0)
        >>> ted = TensorDict({"obs": obs[:-1], "next": {"obs": obs[1:],
        ...     "done": torch.ones(2, 1, dtype=torch.bool)}}, [2])
        >>> Nested2TED()(TED2Nested()(ted))["next", "obs"]
        tensor([1., 2.])
    """

    def __call__(self, data: TensorDictBase, out: TensorDictBase | None = None) -> TensorDictBase:
        """Returns the TED (written into ``out`` too when given)."""
        name = type(self).__name__
        nested = _get_part(data, "data", name, "TED2Nested output")
        lengths = _get_part(data, "lengths", name, "TED2Nested output")
        shape = _get_part(data, "shape", name, "TED2Nested output")
        kept = kept_from_nested(nested, lengths, shape)
        if "non_tensor" in data.keys():
            kept.update(data.get("non_tensor"))
        flat = TensorDict(
            {"data": kept, "ends": _get_part(data, "ends", name, "TED2Nested output")},
            batch_size=[],
        )
        flat.set_non_tensor("duplicated", _get_part(data, "duplicated", name, "TED2Nested output"))
        return super().__call__(flat, out)
