"""Writes staged in the client and shipped to the shards many per Ray call.

One Ray actor call costs about a millisecond whatever it carries, more than a local
``extend`` of a thousand transitions. :class:`WriteStage` holds the writes of a
``write_behind`` :class:`~rl_replay.RayReplayBuffer` in the client until
``write_behind`` of them wait (or ``flush_interval`` seconds went by: a background
thread then ships them), and sends each shard its staged writes in one call (the
shard joins those of one layout into one local ``extend``). At most one call per
shard is in flight, so a shard applies a client's writes in the
order they were made. ``extend`` returns a :class:`PendingWrite`; errors of a
shipped write are raised by the next call of the client (or by ``result()``).
"""

from __future__ import annotations

import itertools
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import torch

from rl_replay._ray_backend import ReplayActorDiedError
from rl_replay._ray_staging import StagingBlock
from rl_replay._ray_transport import count, pack, snapshot

__all__ = ["PendingWrite", "WriteRanges", "WriteStage"]


# ---------------------------------------------------------------- staged writes
class _Batch:
    """Writes staged for one shard and shipped together."""

    def __init__(self, shard: int, block: StagingBlock | None = None) -> None:
        self.shard = shard
        self.items: list[Any] = []  # packed writes (when block is None)
        self.block = block  # or: the writes are the rows of this shard's block
        self.sizes: list[int] = []  # of the block's writes
        self.payload: Future | None = None  # what the shard's call carries (made by _seal)
        self.since = time.monotonic()
        self.ref: Any = None
        self.indices: Any = None  # a list of indices, or WriteRanges
        self.error: BaseException | None = None

    @property
    def writes(self) -> int:
        return len(self.sizes) if self.block is not None else len(self.items)

    @property
    def items_count(self) -> int:
        if self.block is not None:
            return sum(self.sizes)
        return sum(count(item) for item in self.items)


class WriteRanges:
    """The positions of consecutive staged writes, made only when one is asked for.

    A shard whose writes of one call landed on consecutive positions (modulo the
    capacity) replies with the first position and the write sizes; ``ranges[i]``
    is the index tensor of the ``i``-th write (plus ``offset``, the shard's first
    global position).

    Examples:
        >>> WriteRanges(8, [2, 3], capacity=10, offset=0)[1].tolist()
        [0, 1, 2]
    """

    def __init__(self, first: int, sizes: list[int], capacity: int, offset: int) -> None:
        self.first, self.sizes, self.capacity, self.offset = first, sizes, capacity, offset
        self.starts = [first + before for before in itertools.accumulate([0, *sizes[:-1]])]

    def __len__(self) -> int:
        return len(self.sizes)

    def __getitem__(self, position: int) -> torch.Tensor:
        start = self.starts[position]
        index = torch.arange(start, start + self.sizes[position]) % self.capacity
        return index + self.offset if self.offset else index


class PendingWrite:
    """The positions of a write staged by a ``write_behind`` buffer.

    :meth:`result` ships the write if it still waits in the client, waits for the
    shard and returns the global positions (what a synchronous ``extend`` returns),
    or raises the error the shard raised for it.
    """

    def __init__(self, stage: WriteStage, batch: _Batch, position: int) -> None:
        self._stage, self._batch, self._position = stage, batch, position

    def done(self) -> bool:
        """Whether the shard answered for this write (``result()`` then returns at once)."""
        return self._batch.indices is not None or self._batch.error is not None

    def result(self) -> Any:  # Any: the index form of the storage
        """The written positions (waits for the write; raises its error)."""
        self._stage.wait_for(self._batch)
        if self._batch.error is not None:
            raise self._batch.error
        return self._batch.indices[self._position]


class WriteStage:
    """The client-side staging of a ``write_behind`` :class:`~rl_replay.RayReplayBuffer`.

    Writes of a tensor or a tensordict of tensors are copied into the shard's
    :class:`~rl_replay._ray_staging.StagingBlock` (a write of another layout ships
    the shard's staged writes first); others are packed and copied one by one.

    Args:
        put (callable): ``put(payload) -> ref`` copies a block's rows out (``ray.put``).
        send (callable): ``send(shard, payload) -> ref`` makes the shard's call; the
            payload is a list of packed writes or the reference ``put`` returned.
        receive (callable): ``receive(shard, ref) -> list of indices`` waits for it
            (raising the shard's error, or :class:`ReplayActorDiedError`).
        limit (int): staged writes that make the client ship them.
        interval (float or None): seconds a staged write may wait before the
            background thread ships it; ``None``: only ``limit`` and reads ship.
        on_lost (callable): ``on_lost(shard, items)`` counts the staged and in-flight
            items of a shard that died.
    """

    def __init__(
        self,
        put: Callable[[Any], Any],  # Any: a block's rows -> a Ray reference
        send: Callable[[int, Any], Any],  # Any: packed writes or a reference -> a reference
        receive: Callable[[int, Any], list[Any]],  # Any: a Ray reference -> the indices
        *,
        limit: int,
        interval: float | None,
        on_lost: Callable[[int, int], None],
    ) -> None:
        self._put, self._send, self._receive, self._on_lost = put, send, receive, on_lost
        self.limit, self.interval = limit, interval
        self.lock = threading.RLock()
        self._staged: dict[int, _Batch] = {}
        self._inflight: dict[int, _Batch] = {}
        self._blocks: dict[int, StagingBlock] = {}  # where the shard's next writes go
        self._free: dict[int, list[StagingBlock]] = {}  # blocks copied out (by _put)
        self._sealed: dict[int, deque[_Batch]] = {}  # batches waiting to be sent, in order
        self._putter: ThreadPoolExecutor | None = None
        self._deferred: list[BaseException] = []
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    # ------------------------------------------------------------ client calls
    def add(self, shard: int, data: Any) -> PendingWrite:
        """Stage (a copy of) one write for ``shard``; ship everything at ``limit`` writes."""
        with self.lock:
            self.raise_deferred()
            batch = self._stage_in_block(shard, data)
            if batch is None:  # not a block's layout: packed
                staged = self._staged.get(shard)
                if staged is not None and staged.block is not None:
                    self._ship(shard, block=True)  # the block's rows go first
                batch = self._staged.get(shard)
                if batch is None:
                    batch = self._staged[shard] = _Batch(shard)
                batch.items.append(snapshot(pack(data)))
            pending = PendingWrite(self, batch, batch.writes - 1)
            if sum(b.writes for b in self._staged.values()) >= self.limit:
                for staged in list(self._staged):
                    # the shard's previous flush is sent (its block free again); this
                    # one is copied out by the putter thread while the client goes on
                    self._drain(staged, block=True)
                    self._seal(staged)
                    self._drain(staged, block=False)
            self._start_thread()
        return pending

    def _stage_in_block(self, shard: int, data: Any) -> _Batch | None:
        """Copy ``data`` into the shard's block; the batch it joined, or ``None``."""
        staged = self._staged.get(shard)
        if staged is not None and staged.block is None:
            if not StagingBlock.takes(data):
                return None  # packed after packed writes
            self._ship(shard, block=True)  # packed writes go first
        block = self._blocks.get(shard)
        if block is None or not block.add(data):
            if block is not None and block.used:
                self._ship(shard, block=True)  # full, or another layout: ship it first
                block = self._blocks.get(shard)  # the next block (that one is copied out)
            if block is None or not block.add(data):
                block = StagingBlock.build(data, self.limit)
                if block is None:
                    return None
                self._blocks[shard] = block
                self._free.pop(shard, None)  # blocks of the former layout
                if not block.add(data):
                    return None
        batch = self._staged.get(shard)
        if batch is None:
            batch = self._staged[shard] = _Batch(shard, block)
        batch.sizes.append(block.sizes[-1])
        return batch

    def flush(self) -> None:
        """Ship every staged write and wait for every write in flight; raise their errors."""
        with self.lock:
            for shard in {*self._staged, *self._sealed}:
                self._ship(shard, block=True)
            for shard in list(self._inflight):
                self._finish(self._inflight.pop(shard))
            self.raise_deferred()

    def wait_for(self, batch: _Batch) -> None:
        with self.lock:
            if self._staged.get(batch.shard) is batch or batch in self._sealed.get(batch.shard, ()):
                self._ship(batch.shard, block=True)
            if self._inflight.get(batch.shard) is batch:
                self._finish(self._inflight.pop(batch.shard))
            # result() raises the batch's error: not again at the next call
            self._deferred = [err for err in self._deferred if err is not batch.error]

    def raise_deferred(self) -> None:
        """Raise (once) the first error a shipped write got."""
        if self._deferred:
            err = self._deferred[0]
            self._deferred.clear()
            raise err

    def close(self) -> None:
        """Stop the background thread and drop what is left (the buffer is shut down)."""
        self._stop.set()
        with self.lock:
            self._staged.clear()
            self._inflight.clear()
            self._blocks.clear()
            self._sealed.clear()
            self._deferred.clear()
        if self._putter is not None:
            self._putter.shutdown(wait=False)

    # ------------------------------------------------------------ shipping
    def _ship(self, shard: int, *, block: bool) -> None:
        """Send the shard's sealed and staged writes in order (``block``: wait for them)."""
        self._seal(shard)
        self._drain(shard, block=block)

    def _seal(self, shard: int) -> None:
        """End the shard's staged batch: its payload is made, and it waits to be sent.

        A block's rows are copied out (``put``) by the putter thread, and the shard's
        next writes go to another block meanwhile (at most two per shard: ``add``
        sends a shard's sealed batch before sealing the next).
        """
        batch = self._staged.pop(shard, None)
        if batch is None:
            return
        if batch.block is None:
            batch.payload = Future()
            batch.payload.set_result(batch.items)
        else:
            full = batch.block
            free = self._free.get(shard, [])
            reuse = free and free[-1].same_layout(full)
            self._blocks[shard] = free.pop() if reuse else full.empty_like()
            if self._putter is None:
                self._putter = ThreadPoolExecutor(1, thread_name_prefix="RayReplayBuffer-put")
            batch.payload = self._putter.submit(self._put_block, shard, full, full.take())
            stage_ref = weakref.ref(self)
            batch.payload.add_done_callback(lambda _: _try_drain(stage_ref, shard))
        self._sealed.setdefault(shard, deque()).append(batch)

    def _put_block(self, shard: int, block: StagingBlock, rows: Any) -> Any:
        try:
            return self._put(rows)
        finally:
            if self._blocks.get(shard) is not None and self._blocks[shard].same_layout(block):
                self._free.setdefault(shard, []).append(block)  # takes writes again

    def _drain(self, shard: int, *, block: bool) -> None:
        """Send the shard's sealed batches, each once its previous call is answered."""
        queue = self._sealed.get(shard)
        while queue:
            head = queue[0]
            previous = self._inflight.get(shard)
            if not block and (
                not head.payload.done() or (previous is not None and not _ready(previous.ref))
            ):
                return
            try:
                payload = head.payload.result()
            except BaseException as err:  # e.g. the object store is full
                queue.popleft()
                self._fail(head, err)
                continue
            if previous is not None:
                self._finish(self._inflight.pop(shard))  # a dead shard empties the queue
            if not queue or queue[0] is not head:
                continue
            queue.popleft()
            if previous is not None and isinstance(previous.error, ReplayActorDiedError):
                self._fail(head, previous.error)  # the shard is gone: its staged writes too
                continue
            try:
                head.ref = self._send(shard, payload)
            except BaseException as err:  # a dead shard refuses the call itself
                self._fail(head, err)
                continue
            self._inflight[shard] = head

    def _finish(self, batch: _Batch) -> None:
        try:
            results = self._receive(batch.shard, batch.ref)
        except ReplayActorDiedError as err:
            waiting = list(self._sealed.pop(batch.shard, ()))
            staged = self._staged.pop(batch.shard, None)
            if staged is not None:
                waiting.append(staged)
            lost = batch.items_count + sum(other.items_count for other in waiting)
            err.lost_inserts += lost
            self._on_lost(batch.shard, lost)
            self._fail(batch, err)
            for other in waiting:
                other.error = err
            return
        except BaseException as err:  # the shard's own error, typed as it raised it
            self._fail(batch, err)
            return
        batch.indices = results

    def _fail(self, batch: _Batch, err: BaseException) -> None:
        if not any(note.startswith("RayReplayBuffer") for note in getattr(err, "__notes__", [])):
            err.add_note(
                f"RayReplayBuffer(write_behind=...): raised by {batch.writes} write(s) "
                f"staged earlier for shard {batch.shard}; the call that reports it did not "
                "run (call it again)."
            )
        batch.error = err
        self._deferred.append(err)

    # ------------------------------------------------------------ background
    def _start_thread(self) -> None:
        if self.interval is None or self._thread is not None:
            return
        self._thread = threading.Thread(
            target=_flusher, args=(weakref.ref(self), self._stop, self.interval), daemon=True,
            name="RayReplayBuffer-flush",
        )  # fmt: skip
        self._thread.start()

    def tick(self) -> None:
        """Ship writes staged for longer than ``interval``; collect answered calls."""
        with self.lock:
            now = time.monotonic()
            for shard in list(self._inflight):
                if _ready(self._inflight[shard].ref):
                    self._finish(self._inflight.pop(shard))
            for shard, batch in list(self._staged.items()):
                if now - batch.since >= self.interval:
                    self._seal(shard)
            for shard in list(self._sealed):
                self._drain(shard, block=False)


def _ready(ref: Any) -> bool:
    import ray

    done, _ = ray.wait([ref], timeout=0)
    return bool(done)


def _try_drain(stage_ref: weakref.ref, shard: int) -> None:
    """Send a batch whose rows were just copied out, unless the client is busy (it will)."""
    stage = stage_ref()
    if stage is None or not stage.lock.acquire(blocking=False):
        return
    try:
        stage._drain(shard, block=False)
    except BaseException as err:  # the next call raises it
        stage._deferred.append(err)
    finally:
        stage.lock.release()


def _flusher(stage_ref: weakref.ref, stop: threading.Event, interval: float) -> None:
    while not stop.wait(interval / 2):
        stage = stage_ref()
        if stage is None:
            return
        try:
            stage.tick()
        except BaseException as err:  # never let the thread die silently: the next call raises
            with stage.lock:
                stage._deferred.append(err)
        del stage
