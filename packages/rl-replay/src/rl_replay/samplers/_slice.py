"""Sub-trajectory sampling: :class:`SliceSampler`.

Trajectory boundaries live in a :class:`~rl_replay.samplers._trajectories.TrajectoryIndex`.
Writes only queue the rows written (:meth:`SliceSampler.extend` is ``O(1)``); the next
sample reads the trajectory ids (or end flags) of the queued rows from the storage and
folds them into the index in one step, and also picks up rows that were written straight
into the storage (``storage.set``) without the sampler being told. :meth:`SliceSampler.sample`
then picks ``num_slices`` segments uniformly, a start uniformly inside each, and gathers
the slice positions: ``O(batch)`` work plus one ``O(rows written + #trajectories)`` update
when something was written since the last sample.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from tensordict import NestedKey, is_tensor_collection, unravel_key

from rl_replay.samplers._slice_info import SliceInfo
from rl_replay.samplers._slice_keys import (
    DEFAULT_END_KEY,
    Candidate,
    key_candidates,
    key_from_json,
    key_to_json,
    missing_key,
    read_entry,
    resolve,
    storage_keys,
    storage_rows,
)
from rl_replay.samplers._trajectories import Segments, TrajectoryIndex
from rl_replay.samplers._write_queue import WriteQueue
from rl_replay.samplers.base import (
    Sampler,
    check_batch_size,
    check_not_empty,
    check_replacement,
    device_of,
    rows_of,
)

MASK_KEY = ("collector", "mask")  # real (True) vs repeated steps of padded slices

__all__ = ["SliceSampler"]

_MIN_QUEUE = 1 << 16  # scattered queued rows are folded in on write past max(this, 2 x rows)


class SliceSampler(Sampler):
    """Samples slices of data along the first dimension, given start and stop signals.

    Trajectories are identified either by ids (``traj_key``: consecutive elements with
    the same id form one trajectory) or by end signals (``end_key``: ``True`` on the last
    step of each trajectory). The write cursor always ends a trajectory (what comes after
    it is older data), and a trajectory that runs past the end of the storage continues
    at its beginning. With an ``ndim=2`` storage ``[T, B]`` each column is one stream of
    trajectories along dim 0.

    A sample of ``batch_size`` elements holds ``num_slices`` slices of
    ``batch_size // num_slices`` consecutive steps (or slices of ``slice_len`` steps): a
    trajectory is picked uniformly, then a start uniformly among the starts that keep the
    slice inside it. Slices never cross a trajectory end or the write cursor. ``info``
    holds, per sampled step (shape ``[N, 1]``, keys built from ``truncated_key``):
    ``truncated`` on the last step of every slice, ``done``: the stored done flag or
    ``truncated``, and ``terminated``: the stored terminated flag (``False`` when the data
    has none).

    Args:
        num_slices (int, optional): number of slices per sample; exclusive with
            ``slice_len``.
        slice_len (int, optional): length of each slice; exclusive with ``num_slices``.
        end_key (NestedKey, optional): the end signal. Defaults to ``("next", "done")``.
        traj_key (NestedKey, optional): the trajectory ids. When both keys are given the
            ids are used if the data carries them, else the end signal (and the other
            way round when only one is given). When neither is given the key is detected
            from the first write: ``("collector", "traj_ids")``, else ``"episode"``, else
            ``end_key``; :attr:`traj_key` then names the detected id entry.
        ends (torch.Tensor, optional): static end signals of the whole storage (shape of
            the storage), used instead of reading ``end_key``.
        trajectories (torch.Tensor, optional): static trajectory ids of the whole storage,
            used instead of reading ``traj_key``.
        cache_values (bool, optional): accepted for compatibility: boundaries are always
            cached and kept up to date on write. Defaults to ``False``.
        truncated_key (NestedKey, optional): where the slice-end signal goes in ``info``;
            ``None`` returns no signals. Defaults to ``("next", "truncated")``.
        strict_length (bool, optional): if ``True``, trajectories shorter than the slice
            length are never sampled; if ``False`` they give shorter slices (the sample
            then has fewer than ``batch_size`` elements). Defaults to ``True``.
        pad_output (bool, optional): with ``strict_length=False``, pad every short
            slice to the slice length by repeating its last real step, so a sample
            always has ``batch_size`` elements (still a flat batch); the bool entry
            ``("collector", "mask")`` marks real (``True``) and repeated steps, the
            truncation signal sits on the last real step and ``"is_init"`` (when
            stored) is set at every slice start. Prefer ragged slices when the
            consumer accepts them. Defaults to ``False``.
        compile (bool or dict, optional): compile the fixed-length index builder with
            :func:`torch.compile` (a dict is passed as its kwargs). Defaults to ``False``.
        span (bool, int or tuple, optional): let slices hang over the start (left) and/or
            the end (right) of a trajectory, clipped to it, so that edge steps are drawn as
            often as middle ones. ``True`` allows up to ``slice_len - 1`` steps over, an int
            ``i`` up to ``i`` steps; a pair sets left and right apart. Defaults to ``False``.
        use_gpu (bool or torch.device, optional): keep the boundary tables on this CUDA
            device (``True``: the current one) when the storage is on CPU.
            Defaults to ``False``.
        replacement (bool, optional): ``False`` builds a
            :class:`~rl_replay.SliceSamplerWithoutReplacement` with the same
            arguments (``drop_last`` and ``shuffle`` may then be passed too).
            Defaults to ``True``.

    When the stored data has an ``"is_init"`` entry, ``info["is_init"]`` is that entry at
    the sampled positions with the first step of every slice set to ``True`` (recurrent
    modules split a flat sample on it). See ``rl_replay.samplers._slice_info``.

    Raises:
        ValueError: if both or neither of ``num_slices`` and ``slice_len`` are given, or
            both ``ends`` and ``trajectories``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rl_replay.samplers import SliceSampler
        >>> class Storage:  # the part of the storage contract a SliceSampler reads
        ...     ndim = 1
        ...     def __init__(self, data):
        ...         self.data = data
        ...         self.shape = data.shape
        ...     def __len__(self):
        ...         return self.data.shape[0]
        ...     def _get_entry(self, key, index=None):
        ...         return self.data.get(key) if index is None else self.data.get(key)[index]
        >>> data = TensorDict({"episode": torch.tensor([0] * 5 + [1] * 5)}, [10])
        >>> storage = Storage(data)
        >>> sampler = SliceSampler(num_slices=2, traj_key="episode")
        >>> sampler.attach_storage(storage)
        >>> sampler.extend(torch.arange(10))
        >>> _ = torch.manual_seed(0)
        >>> index, info = sampler.sample(storage, 8)
        >>> data["episode"][index].view(2, 4).unique(dim=1).shape  # each slice stays in one episode
        torch.Size([2, 1])
        >>> info["next", "truncated"].view(2, 4)[:, -1].all() | info["next", "terminated"].view(2, 4)[:, -1].all()
        tensor(True)
    """

    _without_replacement: type | None = None  # what replacement=False builds (self-registered)

    def __init_subclass__(cls, *, without_replacement: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)  # kwargs: other class keywords
        if without_replacement:
            SliceSampler._without_replacement = cls

    def __new__(cls, *args: Any, replacement: bool = True, **kwargs: Any) -> Any:
        # kwargs: the constructor's keywords (also SliceSamplerWithoutReplacement's)
        if replacement is False and cls is SliceSampler and cls._without_replacement:
            return super().__new__(cls._without_replacement)  # then initialised as one
        return super().__new__(cls)

    def __init__(
        self,
        *,
        num_slices: int | None = None,
        slice_len: int | None = None,
        end_key: NestedKey | None = None,
        traj_key: NestedKey | None = None,
        ends: torch.Tensor | None = None,
        trajectories: torch.Tensor | None = None,
        cache_values: bool = False,
        truncated_key: NestedKey | None = ("next", "truncated"),
        strict_length: bool = True,
        compile: bool | dict[str, Any] = False,
        span: bool | int | tuple[bool | int, bool | int] = False,
        use_gpu: torch.device | bool = False,
        replacement: bool = True,
        pad_output: bool = False,
    ) -> None:
        Sampler.__init__(self)
        check_replacement(replacement, type(self).__name__, variant="without replacement")
        name = type(self).__name__
        if (num_slices is None) == (slice_len is None):
            raise ValueError(
                f"{name} expected exactly one of num_slices and slice_len, got "
                f"num_slices={num_slices!r}, slice_len={slice_len!r}. Pass one of them."
            )
        for arg, value in (("num_slices", num_slices), ("slice_len", slice_len)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value <= 0
            ):
                raise ValueError(f"{name} expected {arg} to be a positive int, got {value!r}.")
        if pad_output and strict_length:
            raise ValueError(
                f"{name}: pad_output=True is incompatible with strict_length=True: only "
                "slices shorter than the slice length are padded. Pass strict_length=False."
            )
        self.pad_output = bool(pad_output)
        if ends is not None and trajectories is not None:
            raise ValueError(f"{name} expected at most one of ends and trajectories, got both.")
        self.num_slices = num_slices
        self.slice_len = slice_len
        self._candidates: tuple[Candidate, ...] = key_candidates(traj_key, end_key)
        self.end_key = DEFAULT_END_KEY if end_key is None else unravel_key(end_key)
        self.traj_key = None if traj_key is None else unravel_key(traj_key)
        self.truncated_key = None if truncated_key is None else unravel_key(truncated_key)
        self.cache_values = cache_values
        self.strict_length = strict_length
        self.span = _parse_span(span)
        self._static = ("end", ends) if ends is not None else ("traj", trajectories)
        self._use_gpu = use_gpu
        self._compile = compile
        self._fixed_slices: Callable[..., torch.Tensor] = _fixed_slices
        if compile:
            self._fixed_slices = torch.compile(
                _fixed_slices, **(compile if isinstance(compile, dict) else {})
            )
        self._index: TrajectoryIndex | None = None
        self._mode: str | None = None
        self._key: NestedKey | None = None
        self._queue = WriteQueue()  # rows written since the index was updated
        self._cached_plan: _Plan | None = None
        self._info = SliceInfo(self.truncated_key)

    # ----------------------------------------------------------------- writes
    def extend(self, index: torch.Tensor) -> None:
        """Queue the cursor-dim rows just written; the boundaries are updated when sampling.

        The trajectory ids / end flags of queued rows are read at the next sample (or
        once as many rows as the storage holds are queued), so a write costs ``O(1)``.
        """
        if self._static[1] is not None:
            return
        rows = torch.as_tensor(index, dtype=torch.long).reshape(-1)
        storage = self._storage
        ring = storage_rows(storage) if storage is not None else None
        with self._lock:
            self._queue.push(rows, ring=ring)
            if ring is not None and self._queue.loose >= max(_MIN_QUEUE, 2 * ring):
                self._sync(storage)  # bound the queue of scattered writes

    def check_write(self, data: Any) -> None:  # Any: whatever the buffer is about to write
        """Raise before a write whose data carries no trajectory / end entry.

        Buffers call this before writing so that a bad write changes nothing. The first
        tensordict written fixes which entry is used (see ``traj_key``). Data that is
        not a tensordict is left to the sampling-time read.

        Raises:
            KeyError: naming the entries looked for and the available keys.
        """
        if self._static[1] is not None or not is_tensor_collection(data):
            return
        if self._key is not None:
            if data.get(self._key, None) is None:
                keys = list(data.keys(include_nested=True, leaves_only=True))
                raise missing_key(type(self).__name__, ((self._mode, self._key),), keys)
            return
        keys = list(data.keys(include_nested=True, leaves_only=True))
        found = resolve(self._candidates, keys)
        if found is None:
            raise missing_key(type(self).__name__, self._candidates, keys)
        self._use_key(*found)

    def _use_key(self, mode: str, key: NestedKey) -> None:
        self._mode, self._key = mode, key
        if mode == "traj":
            self.traj_key = key
        else:
            self.end_key = key

    def mark_update(self, index: Any, *, storage: Any = None) -> None:  # Any: storage index form
        """Re-read the trajectory ids / end flags of rows overwritten in place (``rb[i] = ...``)."""
        storage = self._storage if storage is None else storage
        if self._static[1] is not None or storage is None:
            return
        with self._lock:
            if self._index is None and not self._queue:
                return
            traj_index = self._sync(storage)
            rows = rows_of(index, traj_index.rows)
            traj_index.rewrite(rows, self._read_values(storage, rows, traj_index.cols))

    def _sync(self, storage: Any) -> TrajectoryIndex:
        """Fold the queued rows, and rows written behind the sampler's back, into the index."""
        traj_index = self._ensure_index(storage)
        cols = traj_index.cols

        def read(rows: torch.Tensor) -> torch.Tensor:
            return self._read_values(storage, rows, cols)

        if self._queue:
            rows = self._queue.rows(traj_index.rows)
            self._queue.clear()
            traj_index.write_rows(rows, read)
        stored = int(getattr(storage, "_len_along_dim0", len(storage)))
        if traj_index.valid_rows < stored:  # written with storage.set(): read them in order
            traj_index.write_rows(traj_index.unwritten(stored), read)
        return traj_index

    def _ensure_index(self, storage: Any) -> TrajectoryIndex:
        if self._index is None:
            shape = tuple(storage.shape)
            cols = int(torch.Size(shape[1:]).numel())
            device = self._table_device(storage)
            if self._key is None:
                self._resolve_key(storage_keys(storage))
            self._index = TrajectoryIndex(shape[0], cols, mode=self._mode, device=device)
        return self._index

    def _table_device(self, storage: Any) -> torch.device:
        if self._use_gpu and torch.cuda.is_available():
            return torch.device("cuda") if self._use_gpu is True else torch.device(self._use_gpu)
        return device_of(storage)

    def _resolve_key(self, keys: list[NestedKey] | None) -> None:
        found = resolve(self._candidates, keys) if keys is not None else None
        if found is None and keys is not None:
            raise missing_key(type(self).__name__, self._candidates, keys)
        # keys unknown (not a tensordict storage): the most preferred entry is read
        self._use_key(*(found if found is not None else self._candidates[0]))

    def _read_values(self, storage: Any, rows: torch.Tensor, cols: int) -> torch.Tensor:
        assert self._key is not None and self._mode is not None
        # with use_gpu the index (and so ``rows``) may live on another device than the data
        rows = rows.to(device_of(storage))
        values = read_entry(storage, self._key, rows, owner=type(self).__name__)
        values = values.reshape(rows.numel(), cols, -1)
        return values.any(-1) if self._mode == "end" else values[..., 0]

    def _static_index(self, storage: Any) -> TrajectoryIndex:
        """Boundaries from the ``ends`` / ``trajectories`` given at construction."""
        if self._index is None:
            mode, values = self._static
            assert values is not None
            values = torch.as_tensor(values)
            rows = values.shape[0]
            cols = int(values[0].numel()) if values.ndim > 1 else 1
            self._mode = mode
            self._index = TrajectoryIndex(rows, cols, mode=mode, device=self._table_device(storage))
            self._index.write(torch.arange(rows), values.reshape(rows, cols))
        return self._index

    def _segments(self, storage: Any) -> tuple[TrajectoryIndex, Segments]:
        if self._static[1] is not None:
            traj_index = self._static_index(storage)
        else:
            traj_index = self._sync(storage)
        return traj_index, traj_index.segments()

    # ----------------------------------------------------------------- sampling
    def _slice_shape(self, batch_size: int) -> tuple[int, int]:
        """``(num_slices, seq_len)`` for a batch of ``batch_size`` elements."""
        per = self.num_slices if self.num_slices is not None else self.slice_len
        assert per is not None
        if batch_size % per:
            arg = "num_slices" if self.num_slices is not None else "slice_len"
            raise ValueError(
                f"{type(self).__name__} expected batch_size to be a multiple of {arg}={per}, "
                f"got batch_size={batch_size}. Pick a batch size divisible by {per}."
            )
        if self.num_slices is not None:
            return self.num_slices, batch_size // self.num_slices
        return batch_size // per, per

    def _plan(self, traj_index: TrajectoryIndex, seg: Segments, seq_len: int) -> _Plan:
        """The segments a slice of ``seq_len`` may come from (cached per write version)."""
        plan = self._cached_plan
        if plan is not None and plan.version == traj_index.version and plan.seq_len == seq_len:
            return plan
        if seg.count == 0:  # no segment at all: nothing was written
            check_not_empty(0, type(self).__name__)
        table = seg.table
        eligible = table[:, table[2] >= seq_len] if self.strict_length else table
        if eligible.shape[1] == 0:
            raise RuntimeError(
                f"{type(self).__name__} found no trajectory of at least {seq_len} steps "
                f"(strict_length=True); the longest stored one has {int(table[2].max())}. "
                "Sample shorter slices, store longer trajectories or pass strict_length=False."
            )
        row, length = eligible[0], eligible[2]
        left, right = self._span_steps(seq_len)
        # relative starts run over [-left, max(length - seq_len + right, -left)]
        choices = (length - seq_len + right + left + 1).clamp_min_(1)
        steps = torch.arange(seq_len, device=table.device)
        plan = _Plan(
            version=traj_index.version,
            seq_len=seq_len,
            segments=eligible,
            table=torch.stack([row, eligible[1], choices]),
            left=left,
            steps=steps,
            last_step=steps == seq_len - 1,
            fixed=self.strict_length and self.span == (False, False),
            wraps=bool((row + length > traj_index.rows).any()),
        )
        self._cached_plan = plan
        return plan

    def sample(self, storage: Any, batch_size: int) -> tuple[Any, dict[str, Any]]:
        """Draw ``batch_size // seq_len`` slices.

        Raises:
            ValueError: if ``batch_size`` is not a multiple of ``num_slices`` / ``slice_len``.
            RuntimeError: if the storage is empty or, with ``strict_length=True``, no
                trajectory is long enough.
        """
        check_batch_size(batch_size, type(self).__name__)
        num_slices, seq_len = self._slice_shape(batch_size)
        with self._lock:
            traj_index, seg = self._segments(storage)
            plan = self._plan(traj_index, seg, seq_len)
            k = self._pick(plan, num_slices)
            picked = plan.table.index_select(1, k).unbind(0)  # row, col, choices
            offset = torch.rand(k.shape, device=k.device).mul_(picked[2]).long()
            if plan.fixed:
                return self._gather_planned(storage, traj_index, plan, picked, offset)
            segment = plan.segments.index_select(1, k)
            return self._gather(
                storage,
                traj_index,
                segment[0],
                segment[1],
                segment[2],
                offset - plan.left,
                plan,
            )

    def _gather_planned(
        self,
        storage: Any,
        traj_index: TrajectoryIndex,
        plan: _Plan,
        picked: tuple[torch.Tensor, ...],
        offset: torch.Tensor,
    ) -> tuple[Any, dict[str, Any]]:
        """The fixed-length fast path: ``picked`` plan rows, slices starting at ``offset``."""
        row, col, _ = picked
        rows = self._fixed_slices(row + offset, plan.steps, traj_index.rows if plan.wraps else 0)
        cols = col.repeat_interleave(plan.seq_len) if traj_index.cols > 1 else None
        index = self._to_storage_index(storage, rows.view(-1), cols)
        slice_end = plan.done_template(offset.numel(), copy=False)
        return index, self._info.build(storage, index, slice_end)

    def _pick(self, plan: _Plan, count: int) -> torch.Tensor:
        """Which eligible segments the ``count`` slices come from (uniform, with replacement)."""
        return torch.randint(plan.table.shape[1], (count,), device=plan.table.device)

    def _span_steps(self, seq_len: int) -> tuple[int, int]:
        """How many steps a slice may hang over the left and right ends of its trajectory."""
        left, right = (seq_len - 1 if s is True else min(int(s), seq_len - 1) for s in self.span)
        return left, right

    def _gather(
        self,
        storage: Any,
        traj_index: TrajectoryIndex,
        row: torch.Tensor,
        col: torch.Tensor,
        length: torch.Tensor,
        offset: torch.Tensor,
        plan: _Plan,
    ) -> tuple[Any, dict[str, Any]]:
        """Storage index and end signals of slices given per slice: segment and start offset."""
        seq_len = plan.seq_len
        if self.strict_length and self.span == (False, False):  # every slice has seq_len steps
            rows = self._fixed_slices(row + offset, plan.steps, traj_index.rows).view(-1)
            cols = col.repeat_interleave(seq_len) if traj_index.cols > 1 else None
            index = self._to_storage_index(storage, rows, cols)
            slice_end = plan.done_template(row.numel(), copy=False)
            return index, self._info.build(storage, index, slice_end)
        first = offset.clamp_min(0)
        stop = torch.minimum(offset + seq_len, length)
        sizes = stop - first
        if self.pad_output:
            return self._gather_padded(storage, traj_index, row + first, col, sizes, seq_len)
        owner = torch.repeat_interleave(torch.arange(row.numel(), device=sizes.device), sizes)
        step = torch.arange(owner.numel(), device=sizes.device) - (sizes.cumsum(0) - sizes)[owner]
        rows = (row + first)[owner].add_(step).remainder_(traj_index.rows)
        slice_end = (step == sizes[owner] - 1).unsqueeze(-1)
        cols = col[owner] if traj_index.cols > 1 else None
        index = self._to_storage_index(storage, rows, cols)
        return index, self._info.build(storage, index, slice_end)

    def _gather_padded(
        self, storage: Any, traj_index: TrajectoryIndex, start: torch.Tensor, col: torch.Tensor,
        sizes: torch.Tensor, seq_len: int,
    ) -> tuple[Any, dict[str, Any]]:  # fmt: skip
        """``seq_len`` steps per slice; steps past a slice's ``size`` repeat its last one."""
        device = sizes.device
        owner = torch.arange(sizes.numel(), device=device).repeat_interleave(seq_len)
        position = torch.arange(seq_len, device=device).repeat(sizes.numel())
        last = (sizes - 1).clamp_min(0)[owner]
        rows = start[owner].add_(torch.minimum(position, last)).remainder_(traj_index.rows)
        index = self._to_storage_index(storage, rows, col[owner] if traj_index.cols > 1 else None)
        ends, starts = (position == last).unsqueeze(-1), (position == 0).unsqueeze(-1)
        info = self._info.build(storage, index, ends, starts=starts)
        info[MASK_KEY] = position <= last
        return index, info

    def _to_storage_index(self, storage: Any, rows: torch.Tensor, cols: torch.Tensor | None) -> Any:
        device = device_of(storage)
        if rows.device != device:
            rows = rows.to(device)
            cols = None if cols is None else cols.to(device)
        if cols is None:
            shape = storage.shape
            if len(shape) <= 1:
                return rows
            return (rows, *(torch.zeros_like(rows) for _ in shape[1:]))
        return (rows, *torch.unravel_index(cols, tuple(storage.shape[1:])))

    # ----------------------------------------------------------------- state
    def _empty(self) -> None:
        with self._lock:
            if self._index is not None and self._static[1] is None:
                self._index.reset()
            self._queue.clear()
            self._info.reset()
            self._cached_plan = None

    def state_dict(self) -> dict[str, Any]:
        """Return the boundary tables (empty until the first write)."""
        with self._lock:
            if self._static[1] is not None:
                return {}
            if self._queue and self._storage is not None:
                self._sync(self._storage)
            if self._index is None:
                return {}
            return {"index": self._index.state_dict(), "key": key_to_json(self._key)}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore the boundary tables from :meth:`state_dict`."""
        with self._lock:
            self._queue.clear()
            self._info.reset()
            if "index" not in state_dict:
                self._index = None
                return
            state = state_dict["index"]
            device = device_of(self._storage) if self._storage is not None else torch.device("cpu")
            self._use_key(state["mode"], key_from_json(state_dict["key"]))
            self._index = TrajectoryIndex(
                int(state["rows"]), int(state["cols"]), mode=self._mode, device=device
            )
            self._index.load_state_dict(state)
            self._cached_plan = None

    def __repr__(self) -> str:
        size = (
            f"num_slices={self.num_slices}"
            if self.num_slices is not None
            else f"slice_len={self.slice_len}"
        )
        key = self._key if self._key is not None else self._candidates[0][1]
        return f"{type(self).__name__}({size}, key={key!r}, strict_length={self.strict_length})"


# --------------------------------------------------------------------- helpers
def _fixed_slices(start: torch.Tensor, steps: torch.Tensor, rows: int) -> torch.Tensor:
    """``[num_slices, seq_len]`` rows of fixed-length slices, wrapping around ``rows`` (if > 0)."""
    out = start.unsqueeze(-1) + steps
    return out.remainder_(rows) if rows else out


@dataclass(frozen=True)
class _Plan:
    """Per-version, per-slice-length sampling tables over the eligible segments."""

    version: int
    seq_len: int
    segments: torch.Tensor  # [4, E]: row, col, length, terminal of the eligible segments
    table: torch.Tensor  # [4, E]: row, col, number of possible starts, terminal offset
    left: int  # steps a slice may hang over the start of its trajectory
    steps: torch.Tensor  # arange(seq_len)
    last_step: torch.Tensor  # steps == seq_len - 1
    fixed: bool  # every slice has seq_len steps (strict length, no span)
    wraps: bool  # some eligible segment runs past the end of the cursor dim
    _done: dict[int, torch.Tensor] = field(default_factory=dict)

    def done_template(self, num_slices: int, *, copy: bool = True) -> torch.Tensor:
        """A ``[num_slices * seq_len, 1]`` mask of the last step of every slice.

        A fresh copy, or with ``copy=False`` the cached template itself (read it only).
        """
        done = self._done.get(num_slices)
        if done is None:
            done = self.last_step.expand(num_slices, self.seq_len).reshape(-1, 1)
            self._done[num_slices] = done
        return done.clone() if copy else done


def _parse_span(span: Any) -> tuple[bool | int, bool | int]:
    if isinstance(span, (bool, int)):
        return (span, span)
    left, right = span
    return (left, right)
