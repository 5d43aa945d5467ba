"""RayReplayBuffer joining a cluster started apart (``ray start --head``) by its address."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch

ray = pytest.importorskip("ray")

from rl_replay import LazyTensorStorage, MinSize, RayReplayBuffer  # noqa: E402


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def head():
    """A head node in its own process group, stopped (that group only) at the end."""
    port = _free_port()
    ray_bin = shutil.which("ray") or str(Path(sys.executable).with_name("ray"))
    proc = subprocess.Popen(
        [ray_bin, "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1",
         "--num-cpus=1", "--include-dashboard=false", "--disable-usage-stats", "--block"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"},
    )  # fmt: skip
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                ray.init(address=address, log_to_driver=False)
                break
            except Exception:  # the head is not up yet
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.5)
        yield address
    finally:
        ray.shutdown()
        # `ray stop` would stop every Ray node of this machine; end only the one started here,
        # and forget its address (ray start wrote it where ray.init() looks for a cluster).
        root = os.environ.get("RAY_TMPDIR") or tempfile.gettempdir()
        current = Path(root) / "ray" / "ray_current_cluster"
        if current.is_file() and current.read_text().strip().endswith(f":{port}"):
            current.unlink()
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_a_buffer_on_a_cluster_joined_by_address(head):
    assert ray.get_runtime_context().gcs_address.endswith(head.split(":")[1])
    rb = RayReplayBuffer(
        storage=LazyTensorStorage(50), batch_size=4, num_shards=2, rate_limiter=MinSize(2)
    )
    try:
        rb.extend(torch.arange(3))
        rb.extend(torch.arange(3, 6))
        sample = rb.sample()
        assert sample.shape == (4,) and set(sample.tolist()) <= set(range(6))
        stats = rb.stats()  # each shard has its own limiter: 3 items each, MinSize(2)
        assert (
            stats["inserts"] == 6 and stats["shards"][1]["rate_limiter"]["min_size_to_sample"] == 2
        )
    finally:
        rb.shutdown()
