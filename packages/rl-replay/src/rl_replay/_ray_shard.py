"""One shard of a :class:`~rl_replay.RayReplayBuffer`: a local buffer, its rate limiter, its checkpoints.

:class:`BufferShard` is plain Python (no Ray import): the Ray actor of
``_ray_buffer.py`` is this class wrapped by ``ray.remote``. Every reply carries the
shard's :func:`meta` (length, total priority mass, minimum priority, inserts) so the
client can split samples across shards without an extra round trip. Data crosses
the process boundary packed by ``_ray_transport.pack`` (tensors as numpy arrays, which
Ray's object store moves without pickling their bytes); ``extend_many`` and
``sample_many`` carry several writes or samples per call.
"""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path
from typing import Any

import torch
from tensordict import is_tensor_collection

from rl_replay._buffer import ReplayBuffer
from rl_replay._rate_limiters import RateLimiter, RateLimitTimeoutError
from rl_replay._ray_staging import unpack_block
from rl_replay._ray_transport import (
    count,
    from_args,
    join,
    pack,
    rows_head,
    split_index,
    unpack,
)
from rl_replay.checkpointers._files import read_json, write_json
from rl_replay.samplers import PrioritizedSampler, RandomSampler
from rl_replay.storages import ListStorage, TensorStorage
from rl_replay.writers import RoundRobinWriter

__all__ = ["BufferShard", "build_component", "remote_shard_class"]

SHARD_FILE = "shard.json"


def build_component(component: Any) -> Any:  # Any: a storage/sampler/writer or its factory
    """A component, or a zero-argument factory of one (a class or ``functools.partial``)."""
    if isinstance(component, type | functools.partial):
        return component()
    return component


# ---------------------------------------------------------------- shard
class BufferShard:
    """A :class:`ReplayBuffer` with an optional rate limiter, FIFO reads and checkpoints.

    Args:
        buffer_kwargs (dict): :class:`ReplayBuffer` keyword arguments; ``storage``,
            ``sampler`` and ``writer`` may be factories.
        rate_limiter (RateLimiter, optional): gates inserts and samples.
        checkpoint_dir (str, optional): where periodic checkpoints go; a complete one
            found there at start-up is loaded (an actor restarted by Ray restores itself).
        checkpoint_every (int, optional): inserted items between periodic checkpoints.
        timeout (float, optional): default seconds a rate-limited call waits.
    """

    def __init__(
        self,
        buffer_kwargs: dict[str, Any],
        *,
        rate_limiter: RateLimiter | None = None,
        checkpoint_dir: str | None = None,
        checkpoint_every: int | None = None,
        timeout: float | None = None,
    ) -> None:
        kwargs = dict(buffer_kwargs)
        for name in ("storage", "sampler", "writer", "transform"):
            if kwargs.get(name) is not None:
                kwargs[name] = build_component(kwargs[name])
        self.rb = ReplayBuffer(**kwargs)
        self.limiter = rate_limiter
        # staged writes may be joined into one extend: same positions, same transform work
        self.joinable = (
            getattr(self.rb.storage, "ndim", 1) == 1
            and type(self.rb.writer) is RoundRobinWriter
            and not len(self.rb.transform)
        )
        self.fifo = bool(getattr(rate_limiter, "fifo", False))
        self._scratch: dict[int, Any] = {}  # reused buffers of staged writes (unpack_block)
        # several batches of one call may come from one draw (see _sample_at_once)
        self.draws_at_once = (
            rate_limiter is None
            and type(self.rb.sampler) is RandomSampler
            and getattr(self.rb.storage, "ndim", 1) == 1
            and not len(self.rb.transform)
            and kwargs.get("collate_fn") is None
        )
        if self.fifo:
            self._check_fifo()
        self.timeout = timeout
        self.inserts = 0
        self.samples = 0
        self.reads = 0  # FIFO items read so far
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir else None
        self.checkpoint_every = checkpoint_every
        self._last_checkpoint = 0
        self.restored: dict[str, Any] | None = None
        if self.checkpoint_dir is not None and (self.checkpoint_dir / SHARD_FILE).is_file():
            self.restored = self.loads(str(self.checkpoint_dir))

    def _check_fifo(self) -> None:
        capacity = getattr(self.rb.storage, "max_size", None)
        if getattr(self.rb.storage, "ndim", 1) != 1 or capacity is None:
            raise ValueError(
                "A Queue rate limiter needs a one-dim storage with a max_size, got "
                f"{self.rb.storage!r}. Use LazyTensorStorage(n) or ListStorage(n)."
            )
        if self.limiter.size > capacity:
            raise ValueError(
                f"Queue(size={self.limiter.size}) holds more items than the storage "
                f"(max_size={capacity}); unread items would be overwritten. Use Queue(size<="
                f"{capacity}) or a bigger storage."
            )

    # ------------------------------------------------------------ bookkeeping
    def meta(self) -> tuple[int, float, float, int]:
        """``(len, priority mass, min priority, inserts)`` of this shard."""
        sampler = self.rb.sampler
        size = len(self.rb)
        if self.fifo:
            size = self.inserts - self.reads
        if isinstance(sampler, PrioritizedSampler) and size:
            return (
                size,
                float(sampler._sum_tree.total()),
                float(sampler._min_tree.total()),
                (self.inserts),
            )
        return size, float(size), 1.0, self.inserts

    def describe(self) -> dict[str, Any]:
        """What the client needs once: capacity, sampler kind, slice unit, meta."""
        sampler = self.rb.sampler
        slice_len = getattr(sampler, "slice_len", None)
        num_slices = getattr(sampler, "num_slices", None)
        return {
            "capacity": int(getattr(self.rb.storage, "max_size", 0) or 0),
            "prioritized": isinstance(sampler, PrioritizedSampler),
            "beta": float(getattr(sampler, "beta", 0.0)),
            "slice_unit": ("len", slice_len) if slice_len else ("num", num_slices),
            "joinable": self.joinable,
            "meta": self.meta(),
        }

    def ping(self) -> tuple[int, float, float, int]:
        return self.meta()

    def pid(self) -> int:

        return os.getpid()

    def stats(self) -> dict[str, Any]:
        out = {
            "len": len(self.rb),
            "inserts": self.inserts,
            "samples": self.samples,
            "restored": self.restored,
        }
        if self.limiter is not None:
            out["rate_limiter"] = self.limiter.stats()
        if self.fifo:
            out["queue_size"] = self.inserts - self.reads
        return out

    def _timeout(self, timeout: Any) -> float | None:
        return self.timeout if timeout == "default" else timeout

    # ------------------------------------------------------------ writes
    def _count(self, data: Any) -> int:
        if isinstance(self.rb.storage, ListStorage) and isinstance(data, list):
            return len(data)
        if isinstance(data, list):
            return len(data)
        if isinstance(data, torch.Tensor) or is_tensor_collection(data):
            return data.shape[self.rb.dim_extend]
        raise TypeError(
            f"A rate-limited extend needs a tensor, a tensordict or a list, got "
            f"{type(data).__name__}. Write it with add() instead."
        )

    def _chunk(self, data: Any, start: int, stop: int) -> Any:
        if isinstance(data, list):
            return data[start:stop]
        index = (slice(None),) * self.rb.dim_extend + (slice(start, stop),)
        return data[index]

    def extend(self, data: Any, timeout: Any = "default") -> tuple[Any, tuple]:
        data = unpack(data)
        if self.limiter is None:
            index = self.rb.extend(data)
            self.inserts += self._count(data) if data is not None else 0
        else:
            total, done, parts = self._count(data), 0, []
            while done < total:
                granted = self.limiter.insert(total - done, timeout=self._timeout(timeout))
                try:
                    part = data if granted == total else self._chunk(data, done, done + granted)
                    parts.append(self.rb.extend(part))
                except BaseException:
                    self.limiter.cancel_insert(granted)
                    raise
                done += granted
                self.inserts += granted
            index = parts[0] if len(parts) == 1 else _cat_index(parts)
        self._maybe_checkpoint()
        return pack(index), self.meta()

    def extend_args(self, head: Any, *chunks: Any) -> tuple[Any, tuple]:
        """:meth:`extend` of a batch sent as inline arguments (``_ray_transport.as_args``)."""
        return self.extend(from_args(head, chunks))

    def extend_many(self, items: list[Any], timeout: Any = "default") -> tuple[list[Any], tuple]:
        """A client's staged writes in one call, in order; the positions of each.

        Writes of one layout are joined and written by one local ``extend`` where
        that writes the same positions (:meth:`describe`'s ``joinable``).
        """
        groups, sizes = join(items) if self.joinable else (items, [[count(i)] for i in items])
        indices = []
        for group, parts in zip(groups, sizes, strict=True):
            index, _ = self.extend(group, timeout)
            indices.extend(pack(part) for part in split_index(unpack(index), parts))
        return indices, self.meta()

    def extend_block(self, payload: Any, timeout: Any = "default") -> tuple[list[Any], tuple]:
        """A client's staged writes copied out of its staging block, in order.

        One local ``extend`` of all the rows where that writes the same positions
        (``joinable``), else one ``extend`` per write; the positions of each write.
        """
        # a tensor storage copies what it writes: the rows may be read in place
        in_place = self.joinable and isinstance(self.rb.storage, TensorStorage)
        data, sizes = unpack_block(payload, self._scratch if in_place else None)
        if self.joinable or len(sizes) == 1:
            index, _ = self.extend(data, timeout)
            index = unpack(index)
            ranges = self._as_ranges(index, sizes)
            if ranges is not None:  # a few numbers instead of every position
                return ranges, self.meta()
            return [pack(part) for part in split_index(index, sizes)], self.meta()
        indices, start = [], 0
        for size in sizes:
            index, _ = self.extend(data[start : start + size], timeout)
            indices.append(index)
            start += size
        return indices, self.meta()

    def _as_ranges(self, index: Any, sizes: list[int]) -> tuple | None:
        """``("__ranges__", first, sizes, capacity)`` if ``index`` is ``first, first + 1, ...``
        (modulo the capacity), as a round-robin writer writes; else ``None``."""
        capacity = getattr(self.rb.storage, "max_size", None)
        total = sum(sizes)
        if (
            len(sizes) < 2
            or not isinstance(capacity, int)
            or not isinstance(index, torch.Tensor)
            or index.shape != (total,)
            or not total
        ):
            return None
        first = int(index[0])
        if not torch.equal(index, torch.arange(first, first + total) % capacity):
            return None
        return ("__ranges__", first, list(sizes), capacity)

    def add(self, data: Any, timeout: Any = "default") -> tuple[Any, tuple]:
        data = unpack(data)
        if self.limiter is not None:
            self.limiter.insert(1, timeout=self._timeout(timeout))
        try:
            index = self.rb.add(data)
        except BaseException:
            if self.limiter is not None:
                self.limiter.cancel_insert(1)
            raise
        self.inserts += 1
        self._maybe_checkpoint()
        return index, self.meta()

    def update_priority(self, index: Any, priority: Any) -> tuple:
        self.rb.update_priority(unpack(index), unpack(priority))
        return self.meta()

    def setitem(self, index: Any, value: Any) -> None:
        self.rb[unpack(index)] = unpack(value)

    def empty(self) -> tuple:
        self.rb.empty()
        self.inserts = self.samples = self.reads = 0
        if self.limiter is not None:
            self.limiter.reset()
        return self.meta()

    # ------------------------------------------------------------ reads
    def sample(
        self, batch_size: int | None, return_info: bool, timeout: Any = "default"
    ) -> tuple[Any, Any, tuple]:
        count = batch_size if batch_size is not None else self.rb.batch_size
        if count is None:
            raise ValueError(
                "RayReplayBuffer.sample expected a batch_size, got None here and at "
                "construction. Pass sample(batch_size) or RayReplayBuffer(batch_size=...)."
            )
        if self.limiter is not None:
            self.limiter.sample(count, timeout=self._timeout(timeout))
        try:
            if self.fifo:
                capacity = self.rb.storage.max_size
                index = (torch.arange(count) + self.reads) % capacity
                data, info = self.rb._read(index), {"index": index}
                self.reads += count
            else:
                data, info = self.rb.sample(count, return_info=True)
        except BaseException:
            if self.limiter is not None:
                self.limiter.cancel_sample(count)
            raise
        self.samples += count
        info = {key: pack(value) for key, value in info.items()} if return_info else None
        return pack(data), info, self.meta()

    def sample_many(self, counts: list[int], return_info: bool, partial: bool = False) -> tuple:
        """Several samples in one call: ``((infos, meta), batch, batch, ...)``.

        One packed batch per non-zero count, each its own return value (a Ray call
        made with ``num_returns=1 + batches``), so each is sent inline when small.
        With ``partial``, only the first sample waits for the rate limiter: the
        batches the limiter does not allow at once are ``None``.
        """
        datas, infos = [], []
        wanted = [size for size in counts if size]
        if len(wanted) > 1 and self.draws_at_once:
            return self._sample_at_once(wanted, return_info)
        for size in wanted:
            try:
                data, info, _ = self.sample(
                    size, return_info, 0 if datas and partial else "default"
                )
            except RateLimitTimeoutError:
                if not (datas and partial):
                    raise
                break
            datas.append(data)
            infos.append(info)
        return ((infos, self.meta()), *datas, *[None] * (len(wanted) - len(datas)))

    def _sample_at_once(self, wanted: list[int], return_info: bool) -> tuple:
        """:meth:`sample_many` as one draw of all the items, packed once, split by the client.

        Only for uniform sampling with replacement and no rate limiter, transform or
        collate function (``draws_at_once``): each item is drawn independently, so
        the parts of one draw are batches drawn one after another. The reply is
        ``((rows, meta), chunk, ...)``: ``rows`` (:func:`~rl_replay._ray_transport.rows_head`)
        describes the one packed buffer of every item, cut into ``len(wanted)`` byte
        chunks (each small enough to travel inside the reply); the client joins them
        with one copy and splits the batches as views of it.
        """
        total = sum(wanted)
        data, info = self.rb.sample(total, return_info=True)
        self.samples += total
        info = {k: pack(v) for k, v in info.items()} if return_info else None
        head, chunks = rows_head(pack(data), wanted, info)
        if head is None:  # not one numpy buffer: one packed batch per size, as sample()
            datas, infos, start = [], [], 0
            for size in wanted:
                part = slice(start, start + size)
                datas.append(pack(data[part]))
                infos.append({k: pack(unpack(v)[part]) for k, v in info.items()} if info else None)
                start += size
            return ((infos, self.meta()), *datas)
        return ((head, self.meta()), *chunks)

    def getitem(self, index: Any) -> Any:
        return pack(self.rb[unpack(index)])

    def len(self) -> int:
        return len(self.rb)

    def attr(self, name: str) -> Any:
        return getattr(self.rb, name)

    # ------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        state = self.rb.state_dict()
        state["_shard"] = self._counters()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> tuple:
        state = dict(state)
        counters = state.pop("_shard", None)
        self.rb.load_state_dict(state)
        if counters is not None:
            self._set_counters(counters)
        return self.meta()

    def _counters(self) -> dict[str, Any]:
        out = {"inserts": self.inserts, "samples": self.samples, "reads": self.reads}
        if self.limiter is not None:
            out["limiter"] = self.limiter.state_dict()
        return out

    def _set_counters(self, counters: dict[str, Any]) -> None:
        self.inserts, self.samples = int(counters["inserts"]), int(counters["samples"])
        self.reads = int(counters.get("reads", 0))
        if self.limiter is not None and "limiter" in counters:
            self.limiter.load_state_dict(counters["limiter"])

    def dumps(self, path: str) -> dict[str, Any]:
        """Write the buffer and the counters to ``path`` atomically; return what was written."""
        record = {**self._counters(), "time": time.time(), "len": len(self.rb), "path": str(path)}
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.rb.dumps(path / "buffer")  # atomic (the buffer's own pointer file)
        # the record is written after the buffer, then renamed into place: a record
        # always describes a complete buffer dump (or an older one, never a newer one)
        tmp = path / f"{SHARD_FILE}.tmp-{os.getpid()}"
        write_json(tmp, record)
        os.replace(tmp, path / SHARD_FILE)
        return record

    def loads(self, path: str) -> dict[str, Any]:
        """Load a checkpoint of :meth:`dumps`; return its record."""
        record = read_json(Path(path) / SHARD_FILE, "RayReplayBuffer")
        self.rb.loads(Path(path) / "buffer")
        self._set_counters(record)
        self._last_checkpoint = self.inserts
        self.restored = record
        return record

    def _maybe_checkpoint(self) -> None:
        if self.checkpoint_dir is None or not self.checkpoint_every:
            return
        if self.inserts - self._last_checkpoint >= self.checkpoint_every:
            self.dumps(str(self.checkpoint_dir))
            self._last_checkpoint = self.inserts


def _cat_index(parts: list[Any]) -> Any:
    if all(isinstance(part, torch.Tensor) for part in parts):
        return torch.cat(parts)
    return tuple(torch.cat(dims) for dims in zip(*parts, strict=True))


_GROUPS = {"write": 1, "read": 1}  # one writer and one reader at a time in each shard
_REMOTE_SHARD: list[Any] = []


def remote_shard_class(ray: Any) -> Any:  # Any: ray's actor class
    """``BufferShard`` as a Ray actor class (made once per process)."""
    if not _REMOTE_SHARD:
        _REMOTE_SHARD.append(ray.remote(concurrency_groups=_GROUPS, max_concurrency=2)(BufferShard))
    return _REMOTE_SHARD[0]
