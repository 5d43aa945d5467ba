"""Skip the doctests of optional backends when absent: h5py (extra ``h5``), ray (extra ``ray``)."""

from __future__ import annotations

import importlib.util

collect_ignore: list[str] = []
if importlib.util.find_spec("h5py") is None:
    collect_ignore.append("src/rl_replay/checkpointers/h5.py")
    collect_ignore.append("src/rl_replay/_ted_h5.py")
if importlib.util.find_spec("ray") is None:
    collect_ignore.append("src/rl_replay/_ray_buffer.py")
