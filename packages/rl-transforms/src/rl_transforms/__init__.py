"""Environment and replay-buffer transforms, TransformedEnv and Compose."""

from __future__ import annotations

__version__ = "0.1.0"

__all__: list[str] = []
