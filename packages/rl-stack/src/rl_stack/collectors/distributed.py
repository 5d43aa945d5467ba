"""``torchrl.collectors.distributed``'s Ray collector: re-exported (needs the ``ray`` extra to run).

Examples:
    >>> import rl_batched_envs
    >>> from rl_stack.collectors.distributed import RayCollector
    >>> RayCollector is rl_batched_envs.RayCollector
    True
"""

from __future__ import annotations

from rl_batched_envs import RayCollector

__all__ = ["RayCollector"]
