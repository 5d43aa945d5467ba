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

import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from rl_replay._ray_backend import ReplayActorDiedError
from rl_replay._ray_staging import StagingBlock
from rl_replay._ray_transport import count, pack, snapshot

__all__ = ["PendingWrite", "WriteStage"]


# ---------------------------------------------------------------- staged writes
class _Batch:
    """Writes staged for one shard and shipped together."""

    def __init__(self, shard: int, block: StagingBlock | None = None) -> None:
        self.shard = shard
        self.items: list[Any] = []  # packed writes (when block is None)
        self.block = block  # or: the writes are the rows of this shard's block
        self.sizes: list[int] = []  # of the block's writes
        self.payload: Any = None  # what the shard's call carries (made by _ship)
        self.since = time.monotonic()
        self.ref: Any = None
        self.indices: list[Any] | None = None
        self.error: BaseException | None = None

    @property
    def writes(self) -> int:
        return len(self.sizes) if self.block is not None else len(self.items)

    @property
    def items_count(self) -> int:
        if self.block is not None:
            return sum(self.sizes)
        return sum(count(item) for item in self.items)


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
        self._blocks: dict[int, StagingBlock] = {}
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
                    self._ship(staged, block=True)
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
            if block is None or not block.add(data):
                block = StagingBlock.build(data, self.limit)
                if block is None:
                    return None
                self._blocks[shard] = block
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
            for shard in list(self._staged):
                self._ship(shard, block=True)
            for shard in list(self._inflight):
                self._finish(self._inflight.pop(shard))
            self.raise_deferred()

    def wait_for(self, batch: _Batch) -> None:
        with self.lock:
            if self._staged.get(batch.shard) is batch:
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
            self._deferred.clear()

    # ------------------------------------------------------------ shipping
    def _ship(self, shard: int, *, block: bool) -> None:
        """Send the shard's staged writes once its previous call is answered.

        A block's rows are copied out (``put``) before waiting for that call, so
        the block takes new writes while the previous call is still in flight.
        """
        previous = self._inflight.get(shard)
        if previous is not None and not block and not _ready(previous.ref):
            return
        staged = self._staged.get(shard)
        if staged is not None and staged.payload is None:
            try:
                staged.payload = (
                    self._put(staged.block.take()) if staged.block is not None else staged.items
                )
            except BaseException as err:  # e.g. the object store is full
                self._staged.pop(shard)
                self._fail(staged, err)
                return
        if previous is not None:
            self._finish(self._inflight.pop(shard))
        batch = self._staged.pop(shard, None)
        if batch is None:
            return
        if previous is not None and isinstance(previous.error, ReplayActorDiedError):
            self._fail(batch, previous.error)  # the shard is gone: its staged writes too
            return
        try:
            batch.ref = self._send(shard, batch.payload)
        except BaseException as err:  # a dead shard refuses the call itself
            self._fail(batch, err)
            return
        self._inflight[shard] = batch

    def _finish(self, batch: _Batch) -> None:
        try:
            results = self._receive(batch.shard, batch.ref)
        except ReplayActorDiedError as err:
            staged = self._staged.pop(batch.shard, None)
            lost = batch.items_count + (staged.items_count if staged else 0)
            err.lost_inserts += lost
            self._on_lost(batch.shard, lost)
            self._fail(batch, err)
            if staged is not None:
                staged.error = err
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
                    self._ship(shard, block=False)


def _ready(ref: Any) -> bool:
    import ray

    done, _ = ray.wait([ref], timeout=0)
    return bool(done)


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
