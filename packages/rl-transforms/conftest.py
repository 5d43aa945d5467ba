"""Skip the doctests of the pretrained encoders when transformers (the ``vision`` extra) is absent."""

from __future__ import annotations

import importlib.util

collect_ignore: list[str] = []
if importlib.util.find_spec("transformers") is None:
    collect_ignore += [
        "src/rl_transforms/_encoders/_r3m.py",
        "src/rl_transforms/_encoders/_vip.py",
        "src/rl_transforms/_encoders/_vc1.py",
    ]
