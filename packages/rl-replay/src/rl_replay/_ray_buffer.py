""":class:`RayReplayBuffer`: a replay buffer living in Ray actors, sharded and rate-limited.

The client in the driver holds one actor handle per shard (each actor is a
``_ray_shard.BufferShard``). Writes go to the shards in turn; a sample is split
across shards in proportion to their size (or total priority) and the parts are
drawn in parallel. ``write_behind`` stages writes in the client (``_ray_batching``),
``prefetch`` brings several batches per call; replies from dead shards are handled by
``_ray_faults``. Ray is imported when a buffer is built, never by ``import rl_replay``.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from tensordict import is_tensor_collection

from rl_replay._rate_limiters import RateLimiter, RateLimitTimeoutError
from rl_replay._ray_backend import import_ray, reraise
from rl_replay._ray_batching import PendingWrite, WriteRanges, WriteStage
from rl_replay._ray_faults import ShardFaults
from rl_replay._ray_shard import remote_shard_class
from rl_replay._ray_sharding import (
    check_int,
    check_layout,
    global_index,
    merge_parts,
    route,
    shard_counts,
)
from rl_replay._ray_transport import as_args, pack, rows_batches, unpack

_BATCHES_PER_CALL = 32  # prefetched batches one call brings (more: one slow reply)

__all__ = ["PendingWrite", "RayReplayBuffer"]


class RayReplayBuffer(ShardFaults):
    """A replay buffer held by Ray actors, with the :class:`~rl_replay.ReplayBuffer` API.

    Each of the ``num_shards`` actors builds its own buffer from ``storage``,
    ``sampler``, ``writer``, ``transform`` and ``batch_size`` (instances are copied
    into each actor; classes and ``functools.partial`` factories are called there).
    Writes go to the shards in turn (a whole ``extend`` to one shard, so
    trajectories stay contiguous); samples are split across shards in proportion to
    their length (their total priority for prioritized samplers, with importance
    weights normalised over all shards), so a sample follows the distribution of
    one local buffer holding everything. Returned indices are global:
    ``shard * capacity + local index``.

    Args:
        storage, sampler, writer, transform, batch_size, collate_fn, dim_extend:
            as for :class:`~rl_replay.ReplayBuffer`. Defaults to the same defaults.
        rate_limiter (RateLimiter, optional): :class:`~rl_replay.MinSize`,
            :class:`~rl_replay.SampleToInsertRatio` or :class:`~rl_replay.Queue`;
            each shard enforces its own copy. Defaults to ``None`` (no limit).
        timeout (float, optional): seconds a rate-limited insert or sample waits
            before raising :class:`~rl_replay.RateLimitTimeoutError`. ``None`` waits
            forever. Defaults to ``60.0``.
        num_shards (int, optional): buffer actors. Defaults to ``1``.
        prefetch (int, optional): batches drawn ahead of the call (as for the local
            buffer): one request brings ``prefetch`` batches (at most 32; under uniform
            sampling one draw, packed once and split into batches in the client), and
            the next request is sent as the first of them is handed out.
            Prefetched batches were drawn before this client's later writes; under a
            rate limiter a request brings what the limiter allows at once (at least
            one batch). Defaults to ``None``.
        write_behind (int, optional): writes staged in this client and shipped
            together: ``extend`` copies its data, returns a :class:`PendingWrite`
            at once, and every ``write_behind`` staged writes (or after
            ``flush_interval``) each shard gets its staged writes in one call, in
            the order they were made. Every other call of this client (``sample``,
            ``len``, ``stats``, ``state_dict``, ``dumps``, ``shutdown``...) ships and
            waits for them first, so it sees them; an error a shard raised for a
            staged write is raised by the next call (or by ``result()``). Defaults
            to ``0`` (``extend`` writes and returns the indices).
        flush_interval (float, optional): seconds a staged write may wait before a
            background thread ships it, so other clients see it. ``None``: only
            ``write_behind`` and this client's calls ship. Defaults to ``0.1``.
        max_restarts (int, optional): times Ray restarts a dead shard; a restarted
            shard reloads its last checkpoint. Defaults to ``0``.
        checkpoint_dir (str or Path, optional): periodic checkpoints go to
            ``checkpoint_dir/shard_<i>``. Defaults to ``None``.
        checkpoint_every (int, optional): inserted items between periodic
            checkpoints of a shard. Defaults to ``None`` (only explicit :meth:`dumps`).
        address (str, optional): the cluster to join when Ray is not running yet
            (``"auto"``, ``"127.0.0.1:6379"``); ``None`` starts a local one.
            Defaults to ``None``.
        ray_init_config (dict, optional): more ``ray.init`` arguments. Defaults to ``None``.
        remote_config (dict, optional): Ray actor options of each shard. Defaults to
            ``{"num_cpus": 0}`` (a buffer waits on I/O, it does not compute).

    Raises:
        ImportError: if Ray is not installed.
        ValueError: for a bad ``num_shards``, ``prefetch``, ``write_behind``,
            ``flush_interval``, ``rate_limiter`` or ``checkpoint_every``.

    Examples:
        >>> import ray, torch
        >>> from rl_replay import LazyTensorStorage, RayReplayBuffer, MinSize
        >>> _ = ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
        >>> rb = RayReplayBuffer(storage=LazyTensorStorage(100), batch_size=4, rate_limiter=MinSize(8))
        >>> rb.extend(torch.arange(10)).tolist()
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
        >>> len(rb), rb.sample().shape
        (10, torch.Size([4]))
        >>> rb.stats()["shards"][0]["rate_limiter"]["samples"]
        4
        >>> rb.shutdown()
        >>> ray.shutdown()
    """

    def __init__(
        self,
        *,
        storage: Any = None,  # Any: a Storage or a factory of one
        sampler: Any = None,  # Any: a Sampler or a factory of one
        writer: Any = None,  # Any: a Writer or a factory of one
        transform: Callable[[Any], Any] | None = None,
        batch_size: int | None = None,
        collate_fn: Callable[[Any], Any] | None = None,
        dim_extend: int | None = None,
        rate_limiter: RateLimiter | None = None,
        timeout: float | None = 60.0,
        num_shards: int = 1,
        prefetch: int | None = None,
        write_behind: int = 0,
        flush_interval: float | None = 0.1,
        max_restarts: int = 0,
        checkpoint_dir: str | Path | None = None,
        checkpoint_every: int | None = None,
        address: str | None = None,
        ray_init_config: dict[str, Any] | None = None,
        remote_config: dict[str, Any] | None = None,
    ) -> None:
        ray = import_ray("RayReplayBuffer")
        check_int("num_shards", num_shards, minimum=1)
        check_int("write_behind", write_behind, minimum=0)
        check_int("max_restarts", max_restarts, minimum=-1)
        if prefetch is not None:
            check_int("prefetch", prefetch, minimum=1)
        if flush_interval is not None and not (
            isinstance(flush_interval, int | float) and flush_interval > 0
        ):
            raise ValueError(
                f"RayReplayBuffer expected flush_interval to be a number of seconds > 0 or "
                f"None, got {flush_interval!r}."
            )
        if checkpoint_every is not None:
            check_int("checkpoint_every", checkpoint_every, minimum=1)
            if checkpoint_dir is None:
                raise ValueError(
                    f"RayReplayBuffer got checkpoint_every={checkpoint_every} but no "
                    "checkpoint_dir. Pass checkpoint_dir=... to say where checkpoints go."
                )
        if rate_limiter is not None and not isinstance(rate_limiter, RateLimiter):
            raise ValueError(
                f"RayReplayBuffer expected rate_limiter to be a RateLimiter (MinSize, "
                f"SampleToInsertRatio, Queue), got {type(rate_limiter).__name__}."
            )
        check_layout(storage, sampler, rate_limiter, num_shards)
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            config = {"include_dashboard": False, "log_to_driver": False}
            config.update(ray_init_config or {})
            # "local": a new runtime even when /tmp/ray names a running cluster
            ray.init(address=address or "local", **config)
        kwargs = {
            "storage": storage,
            "sampler": sampler,
            "writer": writer,
            "transform": transform,
            "batch_size": batch_size,
            "collate_fn": collate_fn,
            "dim_extend": dim_extend,
        }
        options = {"num_cpus": 0, **(remote_config or {}), "max_restarts": max_restarts}
        remote_cls = remote_shard_class(ray).options(**options)
        # Ray rebuilds a restarted shard from its constructor arguments: they stay in the
        # object store (and in scope) while this buffer lives.
        self._kwargs_ref = ray.put(kwargs)
        self._actors = []
        for shard in range(num_shards):
            folder = (
                None if checkpoint_dir is None else str(Path(checkpoint_dir) / f"shard_{shard}")
            )
            self._actors.append(
                remote_cls.remote(
                    self._kwargs_ref,
                    rate_limiter=rate_limiter,
                    checkpoint_dir=folder,
                    checkpoint_every=checkpoint_every,
                    timeout=timeout,
                )
            )
        self._batch_size = batch_size
        self._num_shards = num_shards
        self._prefetch = prefetch
        self._write_behind = write_behind
        self._flush_interval = flush_interval
        self._rate_limited = rate_limiter is not None
        self._max_restarts = max_restarts
        self._client_state()
        try:
            described = ray.get([a.describe.remote() for a in self._actors])
        except ray.exceptions.RayActorError as err:  # the shard's constructor raised
            self._kill()
            reraise(err.args[0] if err.args and isinstance(err.args[0], BaseException) else err)
        except BaseException:
            self._kill()
            raise
        self._capacity = described[0]["capacity"]
        self._prioritized = described[0]["prioritized"]
        self._beta = described[0]["beta"]
        self._unit = described[0]["slice_unit"]
        self._metas = [d["meta"] for d in described]
        self._make_stage()

    def _client_state(self) -> None:
        self._next_shard = itertools.cycle(range(self._num_shards))
        self._stage: WriteStage | None = None
        self._ready: deque[tuple[Any, Any]] = deque()  # prefetched (data, info)
        self._ready_size: int | None = None
        self._sample_job: Any = None  # the request refilling _ready
        self._known_inserts = [0] * self._num_shards
        self._last_dumps: list[dict[str, Any] | None] = [None] * self._num_shards
        self._restarts = [0] * self._num_shards
        self._lost = [0] * self._num_shards
        self._dead = [False] * self._num_shards
        self._recovering = [False] * self._num_shards
        self._restored_from: list[str | None] = [None] * self._num_shards

    def _make_stage(self) -> None:
        if self._write_behind:
            ray = import_ray("RayReplayBuffer")
            self._stage = WriteStage(
                ray.put,
                self._send_writes,
                self._receive_writes,
                limit=self._write_behind,
                interval=self._flush_interval,
                on_lost=self._count_lost,
            )

    def _send_writes(self, shard: int, payload: Any) -> Any:  # Any: writes -> a Ray reference
        actor = self._actor(shard)
        if isinstance(payload, list):  # packed writes
            return actor.extend_many.options(concurrency_group="write").remote(payload)
        return actor.extend_block.options(concurrency_group="write").remote(payload)

    def _receive_writes(self, shard: int, ref: Any) -> Any:  # Any: a sequence of indices
        indices, meta = self._get(ref, shard)
        self._set_meta(shard, meta)
        if isinstance(indices, tuple) and indices and indices[0] == "__ranges__":
            _, first, sizes, capacity = indices
            offset = shard * self._capacity if self._num_shards > 1 else 0
            return WriteRanges(first, sizes, capacity, offset)
        return [global_index(unpack(index), shard, self._capacity) for index in indices]

    def _count_lost(self, shard: int, items: int) -> None:
        self._lost[shard] += items

    def _flush(self) -> None:
        """Ship this client's staged writes and wait for them (raising their errors)."""
        if self._stage is not None:
            self._stage.flush()

    # ------------------------------------------------------------ API
    @property
    def batch_size(self) -> int | None:
        """The default batch size of :meth:`sample`."""
        return self._batch_size

    @property
    def num_shards(self) -> int:
        """The number of buffer actors."""
        return self._num_shards

    def __len__(self) -> int:
        self._flush()
        refs = [actor.len.remote() for actor in self._live()]
        return sum(self._get_all(refs))

    def __repr__(self) -> str:
        return (
            f"RayReplayBuffer(num_shards={self._num_shards}, batch_size={self._batch_size}, "
            f"capacity={self._capacity})"
        )

    def add(self, data: Any) -> int:  # Any: one element
        """Write one element to the next shard; return its global position.

        Raises:
            RateLimitTimeoutError: if the shard's rate limiter blocks past ``timeout``.
            ReplayActorDiedError: if the shard died.
        """
        self._flush()  # after this client's staged writes
        shard = next(self._next_shard)
        ref = self._actor(shard).add.options(concurrency_group="write").remote(pack(data))
        index, meta = self._get(ref, shard)
        self._set_meta(shard, meta)
        return global_index(index, shard, self._capacity)

    def extend(self, data: Any) -> Any:  # Any: a batch; returns indices or a PendingWrite
        """Write a batch to the next shard; return the global positions.

        With ``write_behind > 0`` the data is copied and staged in this client, and
        a :class:`PendingWrite` is returned at once.

        Raises:
            RateLimitTimeoutError: if the shard's rate limiter blocks past ``timeout``.
            ReplayActorDiedError: if the shard died.
        """
        shard = next(self._next_shard)
        if self._stage is not None:
            return self._stage.add(shard, data)
        head, chunks = as_args(pack(data))  # small arguments travel within the call
        ref = self._actor(shard).extend_args.options(concurrency_group="write")
        index, meta = self._get(ref.remote(head, *chunks), shard)
        self._set_meta(shard, meta)
        return global_index(unpack(index), shard, self._capacity)

    def __setitem__(self, index: Any, value: Any) -> None:
        self._flush()
        for shard, (_, local) in route(index, self._num_shards, self._capacity).items():
            part = value
            if self._num_shards > 1 and (
                isinstance(value, torch.Tensor) or is_tensor_collection(value)
            ):
                part = value[route(index, self._num_shards, self._capacity)[shard][0]]
            self._get(self._actor(shard).setitem.remote(pack(local), pack(part)), shard)

    def __getitem__(self, index: Any) -> Any:  # Any: as for ReplayBuffer
        self._flush()
        if self._num_shards > 1:
            raise NotImplementedError(
                "Indexing a sharded RayReplayBuffer is not supported; sample from it, or "
                "read a shard's content with num_shards=1."
            )
        return unpack(self._get(self._actor(0).getitem.remote(pack(index)), 0), copy=True)

    def update_priority(self, index: Any, priority: Any) -> None:  # Any: as for ReplayBuffer
        """Send new priorities to the shards holding ``index`` (global indices)."""
        self._flush()
        priority = torch.as_tensor(priority)
        refs, shards = [], []
        for shard, (where, local) in route(index, self._num_shards, self._capacity).items():
            part = priority if where is None or priority.ndim == 0 else priority.reshape(-1)[where]
            refs.append(self._actor(shard).update_priority.remote(pack(local), pack(part)))
            shards.append(shard)
        for shard, meta in zip(shards, self._get_all(refs, shards), strict=True):
            self._set_meta(shard, meta)

    def sample(
        self, batch_size: int | None = None, return_info: bool = False
    ) -> Any:  # Any: a batch, or (batch, info)
        """Sample a batch across the shards.

        Raises:
            ValueError: if no batch size is given here nor at construction.
            RateLimitTimeoutError: if a shard's rate limiter blocks past ``timeout``.
            ReplayActorDiedError: if a shard died.
        """
        self._flush()
        if batch_size is None:
            batch_size = self._batch_size
            if batch_size is None:
                raise ValueError(
                    "RayReplayBuffer.sample expected a batch_size, got None here and at "
                    "construction. Pass sample(batch_size) or RayReplayBuffer(batch_size=...)."
                )
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(
                f"RayReplayBuffer.sample expected batch_size to be a positive int, got "
                f"{batch_size!r}. Pass batch_size to the buffer constructor or to sample()."
            )
        data, info = self._prefetched(batch_size) if self._prefetch else self._draw(batch_size)
        return (data, info) if return_info else data

    def _draw(self, batch_size: int) -> tuple[Any, Any]:
        return self._collect_samples(self._submit_samples(batch_size, 1))[0]

    def _prefetched(self, batch_size: int) -> tuple[Any, Any]:
        """The next batch drawn ahead; one request for the next ``prefetch`` batches."""
        if self._ready_size not in (None, batch_size):  # another size: drawn now
            return self._draw(batch_size)
        self._ready_size = batch_size
        # a sharded sample under a rate limiter cannot take whatever each shard allows
        per_call = min(self._prefetch, _BATCHES_PER_CALL)
        if self._num_shards > 1 and self._rate_limited:
            per_call = 1
        if not self._ready:
            job, fresh = self._sample_job, self._sample_job is None
            self._sample_job = None
            try:
                self._ready.extend(self._collect_samples(
                    self._submit_samples(batch_size, per_call) if fresh else job
                ))  # fmt: skip
            except RateLimitTimeoutError:
                if fresh:
                    raise
                # a request sent long ago timed out: ask again, with this call's timeout
                self._ready.extend(
                    self._collect_samples(self._submit_samples(batch_size, per_call))
                )
        out = self._ready.popleft()
        if self._sample_job is None:
            self._sample_job = self._submit_samples(batch_size, per_call)
        return out

    def _submit_samples(self, batch_size: int, batches: int) -> tuple[list[list[int]], list]:
        """Ask every shard for its part of ``batches`` samples (one call per shard)."""
        if self._num_shards == 1:
            counts = [[batch_size] * batches]
        else:
            metas = self._get_all([actor.ping.remote() for actor in self._live()])
            for shard, meta in enumerate(metas):
                self._set_meta(shard, meta)
            masses = [meta[1] for meta in metas]
            per_batch = [shard_counts(batch_size, masses, self._unit) for _ in range(batches)]
            counts = [list(column) for column in zip(*per_batch, strict=True)]
        partial = self._num_shards == 1  # one shard may hand out fewer batches than asked
        refs = []
        for shard in range(self._num_shards):
            wanted = sum(1 for size in counts[shard] if size)
            if wanted:
                options = {"concurrency_group": "read", "num_returns": 1 + wanted}
                method = self._actor(shard).sample_many.options(**options)
                refs.append((shard, method.remote(counts[shard], True, partial)))
        return counts, refs

    def _collect_samples(self, job: tuple[list[list[int]], list]) -> list[tuple[Any, Any]]:
        counts, refs = job
        got: dict[int, dict[int, tuple[Any, Any]]] = {}
        for shard, ref in refs:
            (infos, meta), *datas = self._get(ref, shard)
            self._set_meta(shard, meta)
            where = [b for b, n in enumerate(counts[shard]) if n]
            got[shard] = {}
            if isinstance(infos, tuple) and infos and infos[0] == "__rows__":
                pairs = rows_batches(infos, datas)  # one draw, one buffer, split here
            else:
                pairs = [
                    (unpack(data), {key: unpack(value) for key, value in info.items()})
                    for data, info in zip(datas, infos, strict=False)
                ]
            for b, (data, info) in zip(where, pairs, strict=False):
                info = info if info is not None else {}
                if "index" in info:
                    info["index"] = global_index(info["index"], shard, self._capacity)
                got[shard][b] = (data, info)
        batches = min(len(parts) for parts in got.values())  # fewer under a rate limiter
        out = []
        for b in range(batches):
            parts = [(shard, *got[shard][b]) for shard in got if b in got[shard]]
            lowest = [self._metas[shard][2] for shard, _, _ in parts] if self._prioritized else None
            out.append(merge_parts(parts, lowest, self._beta))
        return out

    def empty(self) -> None:
        """Remove every element of every shard; the rate limiters start over."""
        self._flush()
        self._ready.clear()
        self._ready_size = self._sample_job = None
        self._next_shard = itertools.cycle(range(self._num_shards))
        metas = self._get_all([actor.empty.remote() for actor in self._live()])
        for shard, meta in enumerate(metas):
            self._metas[shard] = meta
            self._known_inserts[shard] = 0

    def stats(self) -> dict[str, Any]:
        """Length, counters and rate limits, in total and per shard."""
        self._flush()
        shards = self._get_all([actor.stats.remote() for actor in self._live()])
        for shard, stat in enumerate(shards):
            stat["restarts"] = self._restarts[shard]
            stat["lost_inserts"] = self._lost[shard]
            stat["restored_from"] = self._restored_from[shard]
        return {
            "num_shards": self._num_shards,
            "len": sum(s["len"] for s in shards),
            "inserts": sum(s["inserts"] for s in shards),
            "samples": sum(s["samples"] for s in shards),
            "restarts": sum(self._restarts),
            "lost_inserts": sum(self._lost),
            "shards": shards,
        }

    # ------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """The state of every shard (``{"shards": [...]}``)."""
        self._flush()
        return {"shards": self._get_all([actor.state_dict.remote() for actor in self._live()])}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the output of :meth:`state_dict`.

        Raises:
            ValueError: if the state has another number of shards.
        """
        shards = state_dict["shards"]
        if len(shards) != self._num_shards:
            raise ValueError(
                f"RayReplayBuffer.load_state_dict expected {self._num_shards} shard states, got "
                f"{len(shards)}. Build the buffer with num_shards={len(shards)}."
            )
        refs = [a.load_state_dict.remote(s) for a, s in zip(self._live(), shards, strict=True)]
        for shard, meta in enumerate(self._get_all(refs)):
            self._set_meta(shard, meta)

    def dumps(self, path: str | Path) -> None:
        """Save every shard under ``path/shard_<i>`` (atomically per shard).

        A shard restarted after a crash reloads the newest of this dump and its
        periodic checkpoint.
        """
        self._flush()
        refs = [a.dumps.remote(str(Path(path) / f"shard_{i}")) for i, a in enumerate(self._live())]
        self._last_dumps = self._get_all(refs)

    def loads(self, path: str | Path) -> None:
        """Load a checkpoint written by :meth:`dumps`.

        Raises:
            FileNotFoundError: if a shard's directory or file is missing.
            ValueError: if a file is truncated or does not fit this buffer.
        """
        self._flush()
        refs = [a.loads.remote(str(Path(path) / f"shard_{i}")) for i, a in enumerate(self._live())]
        self._get_all(refs)
        self._metas = self._get_all([actor.ping.remote() for actor in self._live()])

    # ------------------------------------------------------------ lifetime
    def _kill(self) -> None:
        ray = import_ray("RayReplayBuffer")
        for actor in self._actors:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # already dead, or Ray is shutting down
                pass
        self._actors = []

    def shutdown(self) -> None:
        """Kill the shard actors (and the local Ray runtime if this buffer started it)."""
        if not self._actors:
            return
        if getattr(self, "_is_client", False):  # a copy never owns the actors
            try:
                self._flush()
            finally:
                self._close_client()
                self._actors = []
            return
        try:
            self._flush()  # what this client wrote is in the shards before they go
        except Exception:  # a dead shard must not prevent the shutdown
            pass
        self._close_client()
        self._kill()
        if self._owns_ray:
            import_ray("RayReplayBuffer").shutdown()

    close = shutdown

    def _close_client(self) -> None:
        if self._stage is not None:
            self._stage.close()
        self._ready.clear()
        self._sample_job = None

    def __getstate__(self) -> dict[str, Any]:
        """A copy is a client of the same actors: it never shuts them down or Ray."""
        self._flush()
        state = self.__dict__.copy()
        for name in ("_next_shard", "_stage", "_ready", "_ready_size", "_sample_job"):
            state.pop(name)
        state["_owns_ray"] = False
        state["_prefetch"] = None
        state["_is_client"] = True
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._client_state_after_copy()

    def _client_state_after_copy(self) -> None:
        self._next_shard = itertools.cycle(range(self._num_shards))
        self._stage = None
        self._ready, self._ready_size, self._sample_job = deque(), None, None
        self._make_stage()
