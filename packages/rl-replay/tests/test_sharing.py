"""Sharing a LazyMemmapStorage-backed buffer across processes (the seed's example), fork and spawn."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import sys
    import torch
    from torch import multiprocessing as mp
    from tensordict import TensorDict
    from rl_replay import TensorDictReplayBuffer, LazyMemmapStorage

    def worker(rb):
        # Updates the replay buffer with new data
        td = TensorDict({"a": torch.ones(10)}, [10])
        rb.extend(td)

    if __name__ == "__main__":
        mp.set_start_method(sys.argv[1])
        rb = TensorDictReplayBuffer(storage=LazyMemmapStorage(21))
        td = TensorDict({"a": torch.zeros(10)}, [10])
        rb.extend(td)

        proc = mp.Process(target=worker, args=(rb,))
        proc.start()
        proc.join()
        assert proc.exitcode == 0, proc.exitcode
        # the replay buffer now has a length of 20, since the worker updated it
        assert len(rb) == 20, len(rb)
        assert (rb["a"][:10] == 0).all()  # data from main process
        assert (rb["a"][10:20] == 1).all()  # data from remote process
        # the cursor is shared too: the parent continues after the worker's data
        assert rb.extend(TensorDict({"a": torch.full((1,), 2.0)}, [1])).tolist() == [20]
        print("shared-ok")
    """
)


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_worker_extends_are_seen_by_the_parent(tmp_path, start_method):
    script = tmp_path / "share.py"
    script.write_text(SCRIPT)
    out = subprocess.run(
        [sys.executable, str(script), start_method], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "shared-ok"
