"""Tensor specs: shapes, dtypes, domains and composites for RL data."""

from __future__ import annotations

__version__ = "0.1.0"

__all__: list[str] = []
