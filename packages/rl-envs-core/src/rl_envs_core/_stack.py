"""Collecting the steps of a rollout and stacking them along the time dimension.

A rollout's steps used to be kept whole until one final ``torch.stack``. Every step
holds about a dozen objects that Python's cyclic GC tracks (tensors, tensordicts,
their dicts), and keeping them all alive until the end promotes them to the oldest
generation, which makes full collections (over every object of the process, tens to
hundreds of ms) fire every few rollouts. :class:`RolloutSteps` stacks the steps by
chunks of :data:`CHUNK_STEPS` as they come in, so that only one chunk is alive at a
time, and joins the chunks at the end. The stacking itself costs the same.

The fast stack only accepts plain ``TensorDict`` steps with the same keys; at the
first step it cannot stack, the collector stops folding and the end result comes from
``torch.stack`` over every step (folded chunks are unbound again), which gives the
generic behaviour (and its errors) unchanged.
"""

from __future__ import annotations

import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase

#: Steps stacked together while a rollout runs; small enough that a chunk's objects
#: die young (before the GC promotes them), large enough that the per-chunk cost of
#: stacking stays negligible.
CHUNK_STEPS = 32


def _joined_batch(likes: list[TensorDictBase], dim: int, stacking: bool) -> list[int]:
    batch = list(likes[0].batch_size)
    if stacking:
        batch.insert(dim, len(likes))
    else:
        batch[dim] = sum(like.batch_size[dim] for like in likes)
    return batch


def _join_level(
    levels: list[dict], likes: list[TensorDictBase], dim: int, stacking: bool
) -> TensorDict:
    """Stack (or concatenate) the entries of same-keyed leaf dicts; nested levels recurse."""
    size = len(levels[0])
    if any(len(level) != size for level in levels):
        raise KeyError("the steps have different keys")
    join = torch.stack if stacking else torch.cat
    out = {}
    for key, value in levels[0].items():
        column = [level[key] for level in levels]
        if type(value) is TensorDict:
            if not all(type(sub) is TensorDict for sub in column):
                raise TypeError(f"entry {key!r} needs the generic stack")
            out[key] = _join_level([sub._tensordict for sub in column], column, dim, stacking)
        elif isinstance(value, torch.Tensor) and not isinstance(value, TensorDictBase):
            out[key] = join(column, dim)
        else:
            raise TypeError(f"entry {key!r} needs the generic stack")
    batch = _joined_batch(likes, dim, stacking)
    return TensorDict(out, batch_size=batch, device=likes[0].device)


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
    if not all(type(step) is TensorDict for step in steps):
        return None
    try:
        return _join_level([step._tensordict for step in steps], steps, dim, True)
    except (KeyError, TypeError, RuntimeError):
        return None


def dense_cat(chunks: list[TensorDict], dim: int) -> TensorDict | None:
    """``torch.cat(chunks, dim)`` for the chunks :func:`dense_stack` made; ``None`` if they differ."""
    try:
        return _join_level([chunk._tensordict for chunk in chunks], chunks, dim, False)
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
        self._chunks: list[TensorDict] = []
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
        stacked = dense_stack(self._pending, self.dim)
        if stacked is None:
            self._folding = False  # keep every later step; the end stack is generic
            return
        self._chunks.append(stacked)
        self._pending = []

    def steps(self) -> list[TensorDictBase]:
        """Every step, as a tensordict (the folded ones unbound from their chunk)."""
        out: list[TensorDictBase] = []
        for chunk in self._chunks:
            out.extend(chunk.unbind(self.dim))
        out.extend(self._pending)
        return out

    def stack(self) -> TensorDictBase:
        """The steps stacked: lazily if asked, else into one contiguous tensordict.

        Raises:
            RuntimeError: the steps do not stack (keys or shapes vary).
        """
        if self._lazy:
            return LazyStackedTensorDict.lazy_stack(self._pending, self.dim)
        if self._folding and self._pending:
            self._fold()
        if self._folding:
            chunks = self._chunks
            result = chunks[0] if len(chunks) == 1 else dense_cat(chunks, self.dim)
            if result is not None:
                return result
        return torch.stack(self.steps(), self.dim)
