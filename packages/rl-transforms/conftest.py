"""Skip the doctests whose optional backend is absent: the pretrained encoders without
transformers (the ``vision`` extra), MultiStepTransform without rl-replay (``replay``)."""

from __future__ import annotations

import importlib.util

collect_ignore: list[str] = []
if importlib.util.find_spec("transformers") is None:
    collect_ignore += [
        "src/rl_transforms/_encoders/_r3m.py",
        "src/rl_transforms/_encoders/_vip.py",
        "src/rl_transforms/_encoders/_vc1.py",
    ]
if importlib.util.find_spec("rl_replay") is None:
    collect_ignore.append("src/rl_transforms/_multistep.py")
