"""Ray as an optional backend: the import helper and the errors of the Ray buffer.

Nothing here imports Ray at module level: ``import rl_replay`` works without it, and
building a :class:`~rl_replay.RayReplayBuffer` without Ray raises an ``ImportError``
carrying the install line.
"""

from __future__ import annotations

import importlib
from typing import Any, NoReturn

__all__ = ["RAY_EXTRA", "ReplayActorDiedError", "import_ray", "reraise"]

RAY_EXTRA = "pip install 'rl-replay[ray]'"


def import_ray(owner: str) -> Any:  # Any: the ray module
    """Import Ray, or raise an ``ImportError`` naming the extra to install."""
    try:
        return importlib.import_module("ray")
    except ImportError as err:
        raise ImportError(f"{owner} needs ray. Install it with: {RAY_EXTRA}") from err


class ReplayActorDiedError(RuntimeError):
    """A shard actor of a :class:`~rl_replay.RayReplayBuffer` died during a call.

    Attributes:
        shard (int): the shard that died.
        restarted (bool): whether Ray restarted it (the next call may go ahead).
        restored_from (str or None): the checkpoint a restarted shard reloaded (known
            after the restore: see ``rb.stats()["shards"][shard]["restored_from"]``).
        lost_inserts (int): items inserted into the shard as last seen by this client:
            all lost without a restart; with one, an upper bound, and the exact loss
            (items since the restored checkpoint) goes to ``rb.stats()["lost_inserts"]``.
    """

    def __init__(
        self,
        message: str,
        *,
        shard: int,
        restarted: bool = False,
        restored_from: str | None = None,
        lost_inserts: int = 0,
    ) -> None:
        super().__init__(message)
        self.shard = shard
        self.restarted = restarted
        self.restored_from = restored_from
        self.lost_inserts = lost_inserts


def reraise(err: BaseException) -> NoReturn:
    """Raise the exception a remote call raised, as the local buffer would have."""
    cause = getattr(err, "cause", None)
    if isinstance(cause, BaseException):
        raise cause.with_traceback(None) from None
    raise err
