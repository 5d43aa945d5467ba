"""Skip the doctests of MultiStepTransform when rl-replay (the ``replay`` extra) is absent."""

from __future__ import annotations

import importlib.util

collect_ignore: list[str] = []
if importlib.util.find_spec("rl_replay") is None:
    collect_ignore.append("src/rl_transforms/_multistep.py")
