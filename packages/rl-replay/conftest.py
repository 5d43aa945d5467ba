"""Skip the doctests of the optional h5py backend when h5py (the ``h5`` extra) is absent."""

from __future__ import annotations

import importlib.util

collect_ignore: list[str] = []
if importlib.util.find_spec("h5py") is None:
    collect_ignore.append("src/rl_replay/checkpointers/h5.py")
    collect_ignore.append("src/rl_replay/_ted_h5.py")
