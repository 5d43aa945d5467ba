"""Skip the doctests of the Ray collector when ray (the ``ray`` extra) is absent."""

from __future__ import annotations

import importlib.util

collect_ignore: list[str] = []
if importlib.util.find_spec("ray") is None:
    collect_ignore.append("src/rl_batched_envs/collectors/_ray.py")
