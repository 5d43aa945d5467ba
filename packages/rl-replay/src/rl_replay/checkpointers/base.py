"""The :class:`StorageCheckpointerBase` interface."""

from __future__ import annotations

import abc
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["StorageCheckpointerBase"]


class StorageCheckpointerBase(abc.ABC):
    """Public base class for storage checkpointers.

    A checkpointer saves a storage into a directory with :meth:`dumps` and
    restores it with :meth:`loads`.  Storages call their checkpointer from
    their own ``dumps`` / ``loads``; assign ``storage.checkpointer`` to change
    the on-disk format.
    """

    @abc.abstractmethod
    def dumps(self, storage: Any, path: str | Path) -> None:  # Any: a Storage
        """Save ``storage`` under the directory ``path``."""
        raise NotImplementedError

    @abc.abstractmethod
    def loads(self, storage: Any, path: str | Path) -> None:  # Any: a Storage
        """Restore ``storage`` from the directory ``path``."""
        raise NotImplementedError

    def _stage(self, storage: Any, path: Path) -> Callable[[], None]:  # Any: a Storage
        """Read and check the checkpoint at ``path``; return the step that loads it.

        A buffer stages every component before loading any, so that a bad file
        leaves it unchanged.  Checkpointers that cannot read without loading do
        everything in the returned step (the default).
        """
        return lambda: self.loads(storage, path)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
