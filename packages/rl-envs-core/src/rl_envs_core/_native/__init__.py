"""Native environments, model-based environments and exploration helpers."""

from __future__ import annotations

__all__: list[str] = []
