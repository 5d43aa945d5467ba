"""``EnvBase(auto_reset=True)`` behaves the same whatever else has been imported."""

from __future__ import annotations

import json
import subprocess
import sys

_SCRIPT = """
import json, sys
{imports}
import torch
from tensordict import TensorDict
from rl_envs_core.testing import CountingEnv

class SelfResetting(CountingEnv):
    def _step(self, tensordict):
        out = super()._step(tensordict)
        if out["done"].any():
            reset = super()._reset(TensorDict({{"_reset": out["done"]}}, self.batch_size))
            out.update(reset.exclude(*self.done_keys))
        return out

    def _reset(self, tensordict=None, **kwargs):
        if tensordict is not None and "_reset" in tensordict.keys():
            return tensordict.copy()
        return super()._reset(tensordict)

env = SelfResetting(max_steps=2, batch_size=[2], auto_reset=True)
data = env.rollout(5, break_when_any_done=False)
print(json.dumps({{
    "handler": type(env.auto_reset_handler).__qualname__,
    "next": [str(x) for x in data["next", "observation"].flatten().tolist()],
    "root": data["observation"].flatten().tolist(),
    "transforms_loaded": "rl_transforms" in sys.modules,
}}))
"""


def _run(imports: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT.format(imports=imports)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_auto_reset_does_not_depend_on_what_is_imported():
    alone = _run("import rl_envs_core")
    assert not alone["transforms_loaded"]
    assert alone["handler"] == "CarryOverAutoReset"
    with_more = _run("import rl_transforms")
    assert with_more["transforms_loaded"]
    assert with_more == {**alone, "transforms_loaded": True}
    assert "nan" in alone["next"]  # the delivered post-done observations were replaced
