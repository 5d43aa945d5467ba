"""What the client of a :class:`~rl_replay.RayReplayBuffer` does when a shard actor dies.

:class:`ShardFaults` is the part of the buffer that waits for replies: a reply from a
dead actor raises :class:`~rl_replay.ReplayActorDiedError` (with the inserts lost as
this client last saw them); a shard Ray restarts (``max_restarts``) is waited for at
the next call, restored from the newest of its last ``dumps()`` and its periodic
checkpoint, and what the checkpoint missed is counted in ``stats()["lost_inserts"]``.
"""

from __future__ import annotations

import time
from typing import Any

from rl_replay._ray_backend import ReplayActorDiedError, import_ray, reraise

__all__ = ["ShardFaults"]

_RESTART_WAIT = 60.0  # seconds the driver waits for a restarting shard to come back


class ShardFaults:
    """Replies, deaths and restores of the shard actors (a base of ``RayReplayBuffer``)."""

    _actors: list[Any]
    _num_shards: int
    _max_restarts: int
    _metas: list[tuple]
    _known_inserts: list[int]
    _last_dumps: list[dict[str, Any] | None]
    _restarts: list[int]
    _lost: list[int]
    _dead: list[bool]
    _recovering: list[bool]
    _restored_from: list[str | None]

    def _get(self, ref: Any, shard: int) -> Any:
        ray = import_ray("RayReplayBuffer")
        if self._dead[shard]:
            raise ReplayActorDiedError(
                f"RayReplayBuffer shard {shard} is dead (max_restarts={self._max_restarts}). "
                "Build a new buffer and loads() the last dumps() into it.",
                shard=shard,
            )
        try:
            return ray.get(ref)
        except ray.exceptions.RayActorError as err:
            self._on_death(shard, err)
        except ray.exceptions.RayTaskError as err:
            reraise(err)

    def _get_all(self, refs: list[Any], shards: list[int] | None = None) -> list[Any]:
        shards = list(range(len(refs))) if shards is None else shards
        return [self._get(ref, shard) for ref, shard in zip(refs, shards, strict=True)]

    def _set_meta(self, shard: int, meta: tuple) -> None:
        self._metas[shard] = meta
        self._known_inserts[shard] = max(self._known_inserts[shard], meta[3])

    def _on_death(self, shard: int, err: BaseException) -> None:
        known = self._known_inserts[shard]
        if self._max_restarts == 0:
            self._dead[shard] = True
            raise ReplayActorDiedError(
                f"RayReplayBuffer shard {shard} died ({type(err).__name__}); the {known} items "
                "written to it are lost unless you dumps() them earlier. Pass max_restarts=... "
                "(and checkpoint_dir=...) to have it restarted and restored.",
                shard=shard,
                lost_inserts=known,
            ) from None
        self._recovering[shard] = True
        raise ReplayActorDiedError(
            f"RayReplayBuffer shard {shard} died ({type(err).__name__}); Ray is restarting it. "
            "The call that hit the dead shard did not happen; the next call waits for the shard "
            "and restores its last checkpoint (dumps() or checkpoint_dir); rb.stats() then "
            "reports the items lost since that checkpoint.",
            shard=shard,
            restarted=True,
            lost_inserts=known,
        ) from None

    def _live(self) -> list[Any]:
        return [self._actor(shard) for shard in range(self._num_shards)]

    def _actor(self, shard: int) -> Any:  # Any: a Ray actor handle
        """The shard's actor, restored first if it was restarted since the last call."""
        if self._recovering[shard]:
            self._recover(shard)
        return self._actors[shard]

    def _recover(self, shard: int) -> None:
        """Wait for Ray to restart the shard, restore its last checkpoint, count the loss."""
        ray = import_ray("RayReplayBuffer")
        deadline = time.monotonic() + _RESTART_WAIT
        actor = self._actors[shard]
        while True:
            try:
                stats = ray.get(actor.stats.remote(), timeout=_RESTART_WAIT)
                break
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                if time.monotonic() > deadline:
                    self._dead[shard] = True
                    self._recovering[shard] = False
                    raise ReplayActorDiedError(
                        f"RayReplayBuffer shard {shard} died and did not come back within "
                        f"{_RESTART_WAIT}s (max_restarts={self._max_restarts} may be spent).",
                        shard=shard,
                        lost_inserts=self._known_inserts[shard],
                    ) from None
                time.sleep(0.05)
        record = stats["restored"]
        explicit = self._last_dumps[shard]
        if explicit is not None and (record is None or explicit["time"] > record["time"]):
            record = ray.get(actor.loads.remote(explicit["path"]))
        restored_inserts = record["inserts"] if record else 0
        self._lost[shard] += max(self._known_inserts[shard] - restored_inserts, 0)
        self._restarts[shard] += 1
        self._restored_from[shard] = record["path"] if record else None
        self._known_inserts[shard] = restored_inserts
        self._metas[shard] = ray.get(actor.ping.remote())
        self._recovering[shard] = False
