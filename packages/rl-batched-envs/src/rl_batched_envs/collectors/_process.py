"""Collector worker processes: the loop each one runs and how the parent starts them.

Each worker runs a :class:`SyncDataCollector` over its envs. The parent side is the
batched envs' :class:`~rl_batched_envs._worker.WorkerPool` (death and hang
detection, typed errors, shutdown), started empty and given these processes, so
collectors and batched envs fail, time out and stop the same way.

Protocol, one pipe per worker: a one-byte ``COLLECT`` makes the worker collect one
batch in place into its shared-memory batch and answer with one ``OK`` byte. The
first batch, and a batch whose layout changed (a policy writing more entries than
the random actions of ``init_random_frames``), is collected into new memory, moved
to shared memory and handed to the parent with the reply (pickled with
``ForkingPickler``: handles, no data). ``OUT`` hands the worker the batch to collect
into from then on: the multi-sync collector gives each worker its slice of one
buffer it owns. A pickled ``(method, args)`` message calls a collector method
(``set_seed``, ``state_dict``, ...). Replies start with the pool's ``OK``/``ERR``
byte, so a worker's exception is re-raised in the parent with its type and traceback.

Policy weights: the parent keeps one shared-memory copy of every parameter and
buffer of the policy; each worker points its policy's tensors at those copies,
so :meth:`update_policy_weights_` in the parent is one in-place copy that every
worker sees at its next step.
"""

from __future__ import annotations

import gc
import pickle
import signal
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing import connection
from multiprocessing.reduction import ForkingPickler
from typing import Any

import torch

from rl_batched_envs._errors import encode_exception
from rl_batched_envs._pickling import dumps
from rl_batched_envs._worker import CALL, ERR, OK, WorkerPool
from rl_batched_envs.collectors._sync import SyncDataCollector

COLLECT = b"n"  # collect one batch into the shared batch
OUT = b"o"  # the batch to collect into from now on (a view of the parent's buffer)


@dataclass
class WorkerSpec:
    """What a worker needs to build its collector (pickled under ``spawn``)."""

    create_env_fn: Any  # Any: an env factory (or env under fork)
    policy: Any  # Any: the user's policy or None
    weights: dict[str, torch.Tensor] | None
    kwargs: dict[str, Any] = field(default_factory=dict)  # Any: SyncDataCollector kwargs
    num_workers: int = 1


def share_weights(policy: Any) -> dict[str, torch.Tensor] | None:  # Any: any policy
    """Shared-memory copies of the policy's parameters and buffers (``None``: none)."""
    if not isinstance(policy, torch.nn.Module):
        return None
    tensors = dict(policy.named_parameters())
    tensors.update(policy.named_buffers())
    if not tensors:
        return None
    return {name: t.detach().clone().share_memory_() for name, t in tensors.items()}


def bind_weights(policy: torch.nn.Module, weights: dict[str, torch.Tensor]) -> None:
    """Point the policy's parameters and buffers at the shared copies."""
    tensors = dict(policy.named_parameters())
    tensors.update(policy.named_buffers())
    for name, tensor in tensors.items():
        tensor.data = weights[name]


def copy_weights(weights: dict[str, torch.Tensor], source: Any) -> None:  # Any: module/dict/TD
    """Copy ``source`` (a module, a state dict or a TensorDict of params) into ``weights``.

    Raises:
        KeyError: ``source`` lacks one of the policy's tensors.
    """
    if isinstance(source, torch.nn.Module):
        values = dict(source.named_parameters())
        values.update(source.named_buffers())
    elif hasattr(source, "flatten_keys"):  # a TensorDict from TensorDict.from_module
        values = dict(source.flatten_keys(".").items())
    else:
        values = dict(source)
    with torch.no_grad():
        for name, target in weights.items():
            if name not in values:
                raise KeyError(
                    f"update_policy_weights_: the new weights have no {name!r}; the policy "
                    f"has {sorted(weights)}. Pass the policy itself, its state_dict() or "
                    f"TensorDict.from_module(policy)."
                )
            target.copy_(values[name].detach())


def worker_main(
    index: int,
    conn: connection.Connection,
    spec: WorkerSpec,
    inherited: Sequence[connection.Connection],
) -> None:
    """Build one collector, then serve ``COLLECT`` / ``CALL`` / ``CLOSE`` until closed."""
    gc.freeze()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for other in inherited:
        other.close()
    torch.set_num_threads(1)
    try:
        if spec.weights is not None:
            bind_weights(spec.policy, spec.weights)
        collector = SyncDataCollector(spec.create_env_fn, spec.policy, **spec.kwargs)
        collector._set_traj_ids(index, spec.num_workers)
        conn.send_bytes(OK + dumps(collector.frames_per_batch))
    except BaseException as exc:
        conn.send_bytes(ERR + encode_exception(exc, traceback.format_exc()))
        try:
            conn.recv_bytes()
        except (EOFError, OSError):
            pass
        return
    shared = None
    while True:
        try:
            msg = conn.recv_bytes()
        except (EOFError, OSError):
            break
        code = msg[:1]
        try:
            if code == COLLECT:
                batch = collector.rollout(out=shared)
                if batch is shared:
                    reply = OK
                else:  # the first batch, or a new layout: share it, then reuse it
                    shared = batch.share_memory_()
                    reply = OK + pickle_batch(shared)
                collector._frames += shared.numel()
            elif code == OUT:
                shared = pickle.loads(msg[1:])
                reply = OK
            elif code == CALL:
                name, args = pickle.loads(msg[1:])
                reply = OK + dumps(getattr(collector, name)(*args))
            else:
                collector.shutdown()
                conn.send_bytes(OK)
                break
        except BaseException as exc:
            reply = ERR + encode_exception(exc, traceback.format_exc())
        conn.send_bytes(reply)
    conn.close()


def start_workers(
    owner: str,
    specs: Sequence[WorkerSpec],
    *,
    start_method: str,
    timeout: float | None,
) -> tuple[WorkerPool, list[int]]:
    """Start one process per spec; wait for each to build its collector.

    Returns:
        the pool and each worker's ``frames_per_batch``.

    Raises:
        TypeError: a worker could not be started (e.g. an unpicklable factory
            under ``spawn``).
        WorkerDiedError / TimeoutError / the worker's own exception: a worker
            failed while building its collector; every worker is stopped.
    """
    pool = WorkerPool(owner, [], start_method=start_method, timeout=timeout)
    for spec in specs:
        # not a daemon: a worker may start processes of its own (a ParallelEnv);
        # the pool's finalizer stops it when the collector goes away
        pool.start_worker(
            worker_main,
            lambda inherited, spec=spec: (spec, inherited),
            daemon=False,
            what="the env factory and the policy",
        )
    workers = list(range(len(specs)))
    try:
        replies = pool.recv(workers, "start")
    except BaseException:
        pool.close(graceful=False)
        raise
    return pool, [pickle.loads(reply) for reply in replies]


def pickle_batch(batch: Any) -> bytes:  # Any: a shared-memory TensorDict
    """``batch`` as handles to its shared memory (no data), for :func:`unpickle_batch`."""
    return bytes(ForkingPickler.dumps(batch))


def unpickle_batch(reply: bytes) -> Any:  # Any: the worker's shared TensorDict
    """The shared-memory batch pickled by :func:`pickle_batch` (a worker's or the parent's)."""
    return pickle.loads(reply)
