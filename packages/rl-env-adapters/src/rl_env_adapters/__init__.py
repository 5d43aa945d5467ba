"""Adapters from gymnasium, EnvPool and other simulators to EnvBase."""

from __future__ import annotations

__version__ = "0.1.0"

__all__: list[str] = []
