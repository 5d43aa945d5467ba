"""TrajectoryIndex: incremental boundaries against a rebuild from scratch."""

from __future__ import annotations

import pytest
import torch

from rl_replay.samplers._trajectories import TrajectoryIndex


def random_writes(seed: int, rows: int, cols: int, mode: str) -> tuple[TrajectoryIndex, list]:
    generator = torch.Generator().manual_seed(seed)
    index = TrajectoryIndex(rows, cols, mode=mode)
    cursor, log = 0, []
    for _ in range(6):
        count = int(torch.randint(1, rows + 1, (1,), generator=generator))
        written = (torch.arange(count) + cursor) % rows
        values = torch.randint(0, 2, (count, cols), generator=generator)
        index.write(written, values)
        log.append((written, values))
        cursor = (cursor + count) % rows
    return index, log


class TestTrajectoryIndex:
    @pytest.mark.parametrize("mode", ["traj", "end"])
    @pytest.mark.parametrize("seed", range(8))
    def test_incremental_equals_replayed_single_writes(self, mode, seed):
        index, log = random_writes(seed, rows=9, cols=2, mode=mode)
        replayed = TrajectoryIndex(9, 2, mode=mode)
        for written, values in log:
            for row, value in zip(written, values):
                replayed.write(row.view(1), value.view(1, -1))
        assert torch.equal(index.segments().table, replayed.segments().table)

    @pytest.mark.parametrize("seed", range(4))
    def test_segments_tile_the_written_positions(self, seed):
        index, _ = random_writes(seed, rows=11, cols=3, mode="traj")
        seg = index.segments()
        covered = sorted(
            (int(c), (int(r) + step) % 11)
            for r, c, n in zip(seg.row, seg.col, seg.length)
            for step in range(int(n))
        )
        written = sorted((c, r) for c in range(3) for r in range(11) if index._stamp[r] >= 0)
        assert covered == written

    @pytest.mark.parametrize("seed", range(4))
    def test_locate_finds_segment_and_offset(self, seed):
        index, _ = random_writes(seed, rows=10, cols=2, mode="end")
        seg = index.segments()
        rows = torch.arange(10).repeat(2)
        cols = torch.arange(2).repeat_interleave(10)
        found, offset = index.locate(rows, cols)
        for row, col, k, off in zip(rows.tolist(), cols.tolist(), found.tolist(), offset.tolist()):
            if index._stamp[row] < 0:
                assert k == -1
                continue
            assert seg.col[k] == col and off < seg.length[k]
            assert (seg.row[k] + off) % 10 == row

    def test_rewrite_keeps_write_order(self):
        index = TrajectoryIndex(6, 1, mode="traj")
        index.write(torch.arange(6), torch.zeros(6, 1))
        index.rewrite(torch.tensor([3, 4, 5]), torch.ones(3, 1))
        assert index.segments().row.tolist() == [0, 3]
        assert index.written == 6

    def test_state_round_trip(self):
        index, _ = random_writes(0, rows=8, cols=2, mode="traj")
        other = TrajectoryIndex(8, 2, mode="traj")
        other.load_state_dict(index.state_dict())
        assert torch.equal(other.segments().table, index.segments().table)
        assert other.version == index.version

    def test_reset_forgets_everything(self):
        index, _ = random_writes(1, rows=8, cols=1, mode="end")
        index.reset()
        assert index.segments().count == 0 and index.written == 0
