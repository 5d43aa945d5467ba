"""Storages: the containers replay buffers write into."""

from __future__ import annotations

from rl_replay.storages.base import Storage

__all__ = ["Storage"]
