"""Trajectory boundaries of a ring storage, kept up to date on every write.

Slice samplers need, at sample time, the list of contiguous runs of one trajectory in
the storage ("segments"). Scanning the storage per sample would cost ``O(capacity)``; this
module keeps the boundaries incrementally instead: a write of ``n`` cursor-dim rows
touches ``O(n)`` flags and merges them into a sorted tensor of segment starts, and the
segment table is rebuilt from those starts (``O(#segments)``) at most once per write.

Coordinates: the storage has ``rows`` positions along its cursor (time) dim and
``cols`` elements per row (the other storage dims, flattened; ``1`` for ``ndim=1``).
Time runs along a column, so positions are numbered column-major: ``pos = col * rows +
row``. Row ``r + 1`` continues row ``r`` (modulo ``rows``: a trajectory may wrap around
the end of the storage) when it was written right after it (consecutive write stamps,
so the write cursor always cuts) and holds the same trajectory (same id in ``"traj"``
mode; no end flag on row ``r`` in ``"end"`` mode).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

__all__ = ["Segments", "TrajectoryIndex"]

_NEVER = -(2**62)  # the write stamp of a row that holds no data


@dataclass(frozen=True)
class Segments:
    """The valid segments of the storage at one version, as one ``[4, count]`` table."""

    table: torch.Tensor  # rows: first row, column, length (wrapping), terminal (0/1)

    @property
    def count(self) -> int:
        """Number of segments."""
        return self.table.shape[1]

    @property
    def row(self) -> torch.Tensor:
        """First row of each segment."""
        return self.table[0]

    @property
    def col(self) -> torch.Tensor:
        """Column of each segment."""
        return self.table[1]

    @property
    def length(self) -> torch.Tensor:
        """Number of elements (rows) of each segment, wrapping around the cursor dim."""
        return self.table[2]

    @property
    def terminal(self) -> torch.Tensor:
        """Whether each segment's last element ends its trajectory (not cut by the cursor)."""
        return self.table[3] != 0


class TrajectoryIndex:
    """Incrementally maintained segment starts of a ``rows x cols`` ring storage.

    Args:
        rows (int): size of the cursor (time) dim.
        cols (int): number of elements per row.
        mode (str): ``"traj"`` (values are trajectory ids) or ``"end"`` (values are end flags).
        device (torch.device, optional): where the tables live. Defaults to CPU.

    Examples:
        >>> import torch
        >>> index = TrajectoryIndex(6, 1, mode="end")
        >>> index.write(torch.arange(5), torch.tensor([[0], [0], [1], [0], [0]]))
        >>> seg = index.segments()
        >>> seg.row.tolist(), seg.length.tolist(), seg.terminal.tolist()
        ([0, 3], [3, 2], [True, False])
    """

    def __init__(
        self, rows: int, cols: int, *, mode: str, device: torch.device | None = None
    ) -> None:
        self.rows = int(rows)
        self.cols = int(cols)
        self.mode = mode
        device = torch.device("cpu") if device is None else device
        self._stamp = torch.full((self.rows,), _NEVER, dtype=torch.long, device=device)
        self._values = torch.zeros((self.cols, self.rows), dtype=torch.long, device=device)
        self._starts = torch.zeros((0,), dtype=torch.long, device=device)
        self._col_offsets = torch.arange(self.cols, device=device) * self.rows
        self._counter = 0
        self._valid = 0
        self.version = 0
        self._segments: Segments | None = None

    @property
    def valid_rows(self) -> int:
        """How many distinct rows hold data (were written at least once since a reset)."""
        return self._valid

    @property
    def device(self) -> torch.device:
        """Where the tables live."""
        return self._stamp.device

    @property
    def written(self) -> int:
        """How many rows were ever written."""
        return self._counter

    def write(self, rows: torch.Tensor, values: torch.Tensor) -> None:
        """Record that ``rows`` (in write order) now hold ``values`` (shape ``[n, cols]``)."""
        device = self.device
        rows = rows.to(device=device, dtype=torch.long).reshape(-1)
        count = rows.numel()
        if count == 0:
            return
        values = values.to(device=device, dtype=torch.long).reshape(count, self.cols)
        order = torch.arange(count, device=device)
        unique, inverse = torch.unique(rows, return_inverse=True)
        if unique.numel() < count:  # a write longer than the storage: the last one wins
            last = torch.zeros_like(unique)
            last.scatter_reduce_(0, inverse, order, "amax", include_self=False)
            order, _ = torch.sort(last)
            rows, values = rows[order], values[order]
        self._valid += int((self._stamp.index_select(0, rows) < 0).sum())
        self._stamp[rows] = order + self._counter
        self._counter += count
        self._refresh(rows, values)

    def write_rows(self, rows: torch.Tensor, read: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """Record that ``rows`` were written (in order); ``read(rows)`` gives their values.

        ``read`` is called once, with each written row once: the values are read after the
        fact (they are the rows' current content), so a row written several times is read
        once. A batch covering a good part of the storage takes a sort-free ``O(rows)``
        path that rebuilds the breaks of every row.
        """
        rows = rows.to(device=self.device, dtype=torch.long).reshape(-1)
        if rows.numel() * 8 < self.rows:
            unique = _last_writes(rows)
            self.write(unique, read(unique))
            return
        count = rows.numel()
        last = torch.full((self.rows,), _NEVER, dtype=torch.long, device=self.device)
        order = torch.arange(self._counter, self._counter + count, device=self.device)
        last.scatter_reduce_(0, rows, order, "amax", include_self=True)
        written = (last != _NEVER).nonzero().squeeze(-1)
        stamps = last.index_select(0, written)
        self._valid += int((self._stamp.index_select(0, written) < 0).sum())
        self._stamp.index_copy_(0, written, stamps)
        self._counter += count
        values = read(written).to(device=self.device, dtype=torch.long)
        self._values[:, written] = values.reshape(written.numel(), self.cols).T
        # column-major positions of the breaks: nonzero() returns them sorted
        self._starts = self._all_breaks().reshape(-1).nonzero().squeeze(-1)
        self.version += 1
        self._segments = None

    def unwritten(self, stored: int) -> torch.Tensor:
        """The rows among the first ``stored`` that hold no data yet, in order."""
        return (self._stamp[:stored] < 0).nonzero().squeeze(-1)

    def rewrite(self, rows: torch.Tensor, values: torch.Tensor) -> None:
        """Record that ``rows`` were overwritten in place (write order unchanged)."""
        device = self.device
        rows = rows.to(device=device, dtype=torch.long).reshape(-1)
        keep = self._stamp.index_select(0, rows) >= 0
        if bool(keep.any()):
            values = values.to(device=device, dtype=torch.long).reshape(rows.numel(), self.cols)
            self._refresh(rows[keep], values[keep])

    def _refresh(self, rows: torch.Tensor, values: torch.Tensor) -> None:
        """Store the values of ``rows`` and recompute the breaks they can change."""
        self._values[:, rows] = values.T
        touched = torch.unique(torch.cat([rows, (rows + 1) % self.rows]))
        flags = self._is_break(touched)  # [cols, n_touched]
        positions = (self._col_offsets.unsqueeze(-1) + touched).reshape(-1)
        self._starts = _merge(self._starts, positions, positions[flags.reshape(-1)])
        self.version += 1
        self._segments = None

    def _continues(self, rows: torch.Tensor) -> torch.Tensor:
        """Whether each of ``rows`` continues the row before it, per column: ``[cols, n]``."""
        prev = (rows - 1) % self.rows
        stamp, prev_stamp = self._stamp[rows], self._stamp[prev]
        in_time = (stamp >= 0) & (prev_stamp >= 0) & (stamp == prev_stamp + 1)
        if self.mode == "traj":
            same = self._values[:, rows] == self._values[:, prev]
        else:
            same = self._values[:, prev] == 0
        return in_time & same

    def _is_break(self, rows: torch.Tensor) -> torch.Tensor:
        """A break starts a segment: a valid row that does not continue, or the first empty row."""
        valid = (self._stamp[rows] >= 0).expand(self.cols, -1)
        prev_valid = (self._stamp[(rows - 1) % self.rows] >= 0).expand(self.cols, -1)
        return (valid & ~self._continues(rows)) | (~valid & prev_valid)

    def _all_breaks(self) -> torch.Tensor:
        """:meth:`_is_break` of every row at once, with shifts instead of gathers: ``[cols, rows]``."""
        stamp = self._stamp
        prev_stamp = torch.roll(stamp, 1)
        valid, prev_valid = stamp >= 0, prev_stamp >= 0
        in_time = valid & prev_valid & (stamp == prev_stamp + 1)
        prev_values = torch.roll(self._values, 1, dims=1)
        same = self._values == prev_values if self.mode == "traj" else prev_values == 0
        continues = in_time & same
        return (valid & ~continues) | (~valid & prev_valid)

    def segments(self) -> Segments:
        """The valid segments (cached until the next :meth:`write`)."""
        if self._segments is None:
            self._segments = self._build_segments()
        return self._segments

    def _build_segments(self) -> Segments:
        starts = self._starts
        col = torch.div(starts, self.rows, rounding_mode="floor")
        row = starts - col * self.rows
        opens = torch.ones_like(col, dtype=torch.bool)
        opens[1:] = col[1:] != col[:-1]
        # index of the first start of each column: running max of the column openings
        first = torch.cummax(
            torch.where(opens, torch.arange(col.numel(), device=col.device), 0), 0
        )[0]
        following = torch.roll(starts, -1)
        same_col = torch.roll(col, -1) == col
        same_col[-1:] = False
        nxt = torch.where(same_col, following, starts[first] + self.rows)
        length = nxt - starts
        table = torch.stack([row, col, length, self._terminal(row, col, length).long()])
        return Segments(table[:, self._stamp.index_select(0, row) >= 0])

    def _terminal(self, row: torch.Tensor, col: torch.Tensor, length: torch.Tensor) -> torch.Tensor:
        """Whether each segment's last element is a recorded trajectory end."""
        last = (row + length - 1) % self.rows
        values = self._values.view(-1)
        base = col * self.rows
        last_value = values.index_select(0, base + last)
        if self.mode == "end":
            return last_value != 0
        nxt = (last + 1) % self.rows
        stamp = self._stamp
        in_time = stamp.index_select(0, nxt) == stamp.index_select(0, last) + 1
        return in_time & (values.index_select(0, base + nxt) != last_value)

    def locate(self, row: torch.Tensor, col: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The segment holding each ``(row, col)`` position and the offset in it.

        Returns ``(segment, offset)``; ``segment`` is ``-1`` for positions in no valid segment.
        """
        seg = self.segments()
        if seg.row.numel() == 0:
            return torch.full_like(row, -1), torch.zeros_like(row)
        seg_pos = seg.col * self.rows + seg.row
        pos = col * self.rows + row
        k = torch.searchsorted(seg_pos, pos, right=True) - 1
        # a position before its column's first start belongs to the column's last
        # segment, which wraps around the end of the cursor dim
        last_of_col = torch.searchsorted(seg_pos, (col + 1) * self.rows) - 1
        before = (k < 0) | (seg.col[k.clamp_min(0)] != col)
        k = torch.where(before, last_of_col, k)
        found = k >= 0
        k = k.clamp_min(0)
        offset = (row - seg.row[k]) % self.rows
        inside = found & (seg.col[k] == col) & (offset < seg.length[k])
        return torch.where(inside, k, -1), offset

    def reset(self) -> None:
        """Forget every write."""
        self._stamp.fill_(_NEVER)
        self._values.zero_()
        self._starts = self._starts[:0]
        self._counter = 0
        self._valid = 0
        self.version += 1
        self._segments = None

    def state_dict(self) -> dict[str, object]:
        """The tables as tensors plus the write counter."""
        return {
            "rows": self.rows,
            "cols": self.cols,
            "mode": self.mode,
            "counter": self._counter,
            "version": self.version,
            "stamp": self._stamp.clone(),
            "values": self._values.clone(),
            "starts": self._starts.clone(),
        }

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Restore :meth:`state_dict` (shapes must match)."""
        device = self.device
        self._stamp = torch.as_tensor(state["stamp"]).to(device=device, dtype=torch.long).clone()
        self._values = torch.as_tensor(state["values"]).to(device=device, dtype=torch.long).clone()
        self._starts = torch.as_tensor(state["starts"]).to(device=device, dtype=torch.long).clone()
        self._counter = int(state["counter"])  # type: ignore[arg-type]
        self._valid = int((self._stamp >= 0).sum())
        self.version = int(state["version"])  # type: ignore[arg-type]
        self._segments = None


def _last_writes(rows: torch.Tensor) -> torch.Tensor:
    """``rows`` without the writes a later write of the same row overrides, in write order."""
    unique, inverse = torch.unique(rows, return_inverse=True)
    if unique.numel() == rows.numel():
        return rows
    last = torch.zeros_like(unique)
    last.scatter_reduce_(0, inverse, torch.arange(rows.numel()), "amax", include_self=False)
    return rows[torch.sort(last).values]


def _merge(starts: torch.Tensor, touched: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
    """Sorted ``starts`` without the sorted ``touched`` positions, plus the sorted ``new`` ones."""
    if touched.numel() == 0:
        return starts
    at = torch.searchsorted(touched, starts).clamp_max_(touched.numel() - 1)
    kept = starts[touched[at] != starts]
    if new.numel() == 0:
        return kept
    slots = torch.searchsorted(kept, new) + torch.arange(new.numel(), device=new.device)
    out = torch.empty(kept.numel() + new.numel(), dtype=starts.dtype, device=starts.device)
    is_new = torch.zeros(out.shape, dtype=torch.bool, device=out.device)
    is_new[slots] = True
    out[slots] = new
    out[~is_new] = kept
    return out
