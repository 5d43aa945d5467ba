"""Collecting the steps of a rollout and stacking them along the time dimension.

A rollout's steps used to be kept whole until one final ``torch.stack``. Every step
holds about a dozen objects that Python's cyclic GC tracks (tensors, tensordicts,
their dicts), and keeping them all alive until the end promotes them to the oldest
generation, which makes full collections (over every object of the process, tens to
hundreds of ms) fire every few rollouts. :class:`RolloutSteps` folds the steps by
chunks of :data:`CHUNK_STEPS` as they come in, so that only one chunk of step objects
is alive at a time:

* small leaves (under :data:`DEFERRED_BYTES` per step) are stacked per chunk, and the
  chunks concatenated at the end (copying them twice costs nothing measurable);
* large leaves (pixels, stacked frames) keep their per-step tensors, one object per
  step and leaf, and are stacked once at the end, so their bytes are copied once.

The fast stack only accepts plain ``TensorDict`` steps with the same keys; at the
first step it cannot stack, the collector stops folding and the end result comes from
``torch.stack`` over every step (folded chunks are unbound again), which gives the
generic behaviour (and its errors) unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase

from rl_envs_core._td import entries_of

#: Steps folded together while a rollout runs; small enough that a chunk's objects
#: die young (before the GC promotes them), large enough that the per-chunk cost of
#: stacking stays negligible.
CHUNK_STEPS = 32

#: Leaves of at least this many bytes per step are stacked once at the end instead
#: of per chunk: for them the second copy (chunks into the result) would cost as much
#: as the stacking itself, while their per-step tensors are few objects.
DEFERRED_BYTES = 4096


def _joined_batch(likes: list, dim: int, stacking: bool) -> list[int]:
    batch = list(likes[0].batch_size)
    if stacking:
        batch.insert(dim, len(likes))
    else:
        batch[dim] = sum(like.batch_size[dim] for like in likes)
    return batch


@dataclass
class _Folded:
    """One level of a folded chunk: stacked small leaves, per-step lists of large ones."""

    entries: dict[str, object]  # str -> Tensor | list[Tensor] | _Folded
    batch_size: list[int]
    device: torch.device | None


def _is_plain_tensor(value: object) -> bool:
    return isinstance(value, torch.Tensor) and not isinstance(value, TensorDictBase)


def _fold_level(levels: list[dict], likes: list[TensorDictBase], dim: int) -> _Folded:
    size = len(levels[0])
    if any(len(level) != size for level in levels):
        raise KeyError("the steps have different keys")
    entries: dict[str, object] = {}
    for key, value in levels[0].items():
        column = [level[key] for level in levels]
        if type(value) is TensorDict:
            if not all(type(sub) is TensorDict for sub in column):
                raise TypeError(f"entry {key!r} needs the generic stack")
            entries[key] = _fold_level(entries_of(column), column, dim)
        elif _is_plain_tensor(value):
            if value.numel() * value.element_size() >= DEFERRED_BYTES:
                if not all(_is_plain_tensor(item) for item in column):
                    raise TypeError(f"entry {key!r} needs the generic stack")
                entries[key] = column
            else:
                entries[key] = torch.stack(column, dim)
        else:
            raise TypeError(f"entry {key!r} needs the generic stack")
    return _Folded(entries, _joined_batch(likes, dim, True), likes[0].device)


def _join_folded(chunks: list[_Folded], dim: int) -> TensorDict:
    """The tensordict of ``chunks`` joined along ``dim`` (large leaves stacked here)."""
    first = chunks[0]
    if any(chunk.entries.keys() != first.entries.keys() for chunk in chunks):
        raise KeyError("the chunks have different keys")
    out = {}
    for key, value in first.entries.items():
        column = [chunk.entries[key] for chunk in chunks]
        if type(value) is _Folded:
            if not all(type(part) is _Folded for part in column):
                raise TypeError(f"entry {key!r} needs the generic stack")
            out[key] = _join_folded(column, dim)
        elif type(value) is list:
            if not all(type(part) is list for part in column):
                raise TypeError(f"entry {key!r} needs the generic stack")
            out[key] = torch.stack([step for part in column for step in part], dim)
        elif len(column) == 1:
            out[key] = value
        else:
            if any(type(part) is list for part in column):
                raise TypeError(f"entry {key!r} needs the generic stack")
            out[key] = torch.cat(column, dim)
    batch = list(first.batch_size)
    batch[dim] = sum(chunk.batch_size[dim] for chunk in chunks)
    return TensorDict(out, batch_size=batch, device=first.device)


def dense_stack(steps: list[TensorDictBase], dim: int) -> TensorDict | None:
    """``torch.stack(steps, dim)`` for plain ``TensorDict`` steps with the same keys.

    Reads each level's leaf dict once per step instead of going through the generic
    stacking path (about twice as fast on small steps). Returns ``None`` for any other
    layout, or when the leaves do not stack.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> steps = [TensorDict({"a": torch.full((2,), float(i))}, [2]) for i in range(3)]
        >>> dense_stack(steps, 1)["a"]
        tensor([[0., 1., 2.],
                [0., 1., 2.]])
    """
    folded = _fold(steps, dim)
    return None if folded is None else _join([folded], dim)


def _fold(steps: list[TensorDictBase], dim: int) -> _Folded | None:
    if not all(type(step) is TensorDict for step in steps):
        return None
    try:
        return _fold_level(entries_of(steps), steps, dim)
    except (KeyError, TypeError, RuntimeError):
        return None


def _join(chunks: list[_Folded], dim: int) -> TensorDict | None:
    try:
        return _join_folded(chunks, dim)
    except (KeyError, TypeError, RuntimeError):
        return None


class RolloutSteps:
    """The steps of a rollout, stacked along a new dim (after the batch dims) at the end.

    Args:
        lazy (bool, optional): keep every step and return a lazy stack. Defaults to
            ``False`` (stack by chunks into one contiguous tensordict).
        chunk (int, optional): steps stacked together while the rollout runs.
            Defaults to :data:`CHUNK_STEPS`.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> steps = RolloutSteps(chunk=2)
        >>> for i in range(5):
        ...     steps.append(TensorDict({"a": torch.tensor([float(i)])}, []))
        >>> steps.stack()["a"].squeeze(-1)
        tensor([0., 1., 2., 3., 4.])
    """

    def __init__(self, *, lazy: bool = False, chunk: int = CHUNK_STEPS) -> None:
        self._lazy = lazy
        self._chunk = chunk
        self._folding = not lazy
        self._pending: list[TensorDictBase] = []
        self._chunks: list[_Folded] = []
        self.dim = 0

    def append(self, step: TensorDictBase) -> None:
        """Add one step (the stacking dim follows the first step's batch dims)."""
        pending = self._pending
        if not pending and not self._chunks:
            self.dim = step.batch_dims
        elif self._folding and len(pending) >= self._chunk:
            # fold before adding: the steps folded have been seen by the callback and
            # the policy of the following step, as with one stack at the end
            self._fold()
        self._pending.append(step)

    def _fold(self) -> None:
        folded = _fold(self._pending, self.dim)
        if folded is None:
            self._folding = False  # keep every later step; the end stack is generic
            return
        self._chunks.append(folded)
        self._pending = []

    def steps(self) -> list[TensorDictBase]:
        """Every step, as a tensordict (the folded ones unbound from their chunk)."""
        out: list[TensorDictBase] = []
        for chunk in self._chunks:
            out.extend(_join_folded([chunk], self.dim).unbind(self.dim))
        out.extend(self._pending)
        return out

    def stack(self, stack_dim_name: str | None = None) -> TensorDictBase:
        """The steps stacked: lazily if asked, else into one contiguous tensordict.

        Args:
            stack_dim_name (str, optional): the name a lazy stack gives its stack dim
                (naming it afterwards renames every step). Defaults to ``None``.

        Raises:
            RuntimeError: the steps do not stack (keys or shapes vary).
        """
        if self._lazy:
            return LazyStackedTensorDict.lazy_stack(
                self._pending, self.dim, stack_dim_name=stack_dim_name
            )
        if self._folding and self._pending:
            self._fold()
        if self._folding:
            result = _join(self._chunks, self.dim)
            if result is not None:
                return result
        return torch.stack(self.steps(), self.dim)
