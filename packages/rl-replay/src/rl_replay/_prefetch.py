"""Prefetching: batches sampled ahead in threads, and their place in a buffer's state.

A prefetching buffer's ``state_dict`` waits for the batches in flight and saves
their sampled indices (with the sampler's info) and the buffer generator's
state; loading it into another buffer replaces that buffer's pending batches
with reads of the saved indices, so both buffers then return the same batches.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import torch

__all__ = ["prefetch_state", "restore_prefetch", "sample_prefetched"]


def sample_prefetched(buffer: Any, batch_size: int) -> tuple[Any, dict[str, Any]]:
    """Return the oldest prefetched batch and keep ``buffer._prefetch`` batches in flight."""
    if buffer._executor is None:
        # one worker: batches are drawn in the order they were asked for, so a buffer's
        # stream of batches depends on its generator only (and state/pickle round trips hold)
        buffer._executor = ThreadPoolExecutor(max_workers=1)
    futures = buffer._futures
    if not futures:
        futures.append((batch_size, buffer._executor.submit(buffer._sample, batch_size)))
    _, future = futures.popleft()
    while len(futures) < buffer._prefetch:  # keep `prefetch` batches in flight
        futures.append((batch_size, buffer._executor.submit(buffer._sample, batch_size)))
    return future.result()


def prefetch_state(buffer: Any) -> dict[str, Any]:
    """The generator state and the pending batches' infos (waits for the batches in flight)."""
    state: dict[str, Any] = {}
    pending = {}
    for position, (batch_size, future) in enumerate(list(buffer._futures)):
        info = future.result()[1]
        if isinstance(info.get("index"), torch.Tensor):
            entries = {key: value for key, value in info.items() if isinstance(value, torch.Tensor)}
            pending[str(position)] = {"batch_size": batch_size, "info": entries}
    if pending:
        state["_prefetched"] = pending
    if buffer._generator is not None:  # read after the batches in flight drew from it
        state["_generator_state"] = buffer._generator.get_state()
    return state


def restore_prefetch(buffer: Any, state: dict[str, Any]) -> None:
    """Load what :func:`prefetch_state` saved (after the components were loaded)."""
    buffer._futures.clear()  # the caller waited for the batches in flight
    generator_state = state.get("_generator_state")
    if generator_state is not None and buffer._generator is not None:
        buffer._generator.set_state(generator_state)
    if not buffer._prefetch:
        return
    pending = state.get("_prefetched", {})
    for position in sorted(pending, key=int):
        entry = pending[position]
        info = dict(entry["info"])
        future: Future = Future()
        future.set_result((buffer._read(info["index"]), info))
        buffer._futures.append((int(entry["batch_size"]), future))
