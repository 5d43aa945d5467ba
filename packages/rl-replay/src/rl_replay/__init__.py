"""Replay buffers, storages, samplers, writers and checkpointers."""

from __future__ import annotations

__version__ = "0.1.0"

__all__: list[str] = []
