"""Skip a backend module's doctests when that backend is not installed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

# folder of rl_env_adapters -> module that its doctests need
_BACKEND_DIRS = {"_gym": "gymnasium", "_envpool": "envpool"}


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if not isinstance(item, pytest.DoctestItem):
            continue
        parts = Path(str(item.path)).parts
        for folder, module in _BACKEND_DIRS.items():
            if folder in parts and not _installed(module):
                item.add_marker(pytest.mark.skip(reason=f"{module} is not installed"))


@pytest.fixture(scope="session")
def toy_env_id() -> str:
    """Register (once) and return the id of a small gymnasium env with no render deps.

    Observations are ``[last_action, t]``; episodes end after ``max_steps`` steps
    (terminated); ``render()`` returns a ``(4, 5, 3)`` uint8 frame filled with ``t``;
    the info holds ``count`` (= t), ``_private`` and a string ``name``.
    """
    gym = pytest.importorskip("gymnasium")
    import numpy as np

    class ToyEnv(gym.Env):
        metadata = {"render_modes": ["rgb_array"], "render_fps": 30}  # noqa: RUF012 - gym API

        def __init__(self, render_mode=None, max_steps=3, truncate=False):
            self.render_mode = render_mode
            self.max_steps = max_steps
            self.truncate = truncate
            self.observation_space = gym.spaces.Box(-10, 10, (2,), np.float32)
            self.action_space = gym.spaces.Discrete(2)
            self.t = 0

        def _info(self):
            return {"count": self.t, "_private": 1, "name": "toy"}

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            return np.array([0, 0], np.float32), self._info()

        def step(self, action):
            self.t += 1
            end = self.t >= self.max_steps
            obs = np.array([int(action), self.t], np.float32)
            return obs, 1.0, end and not self.truncate, end and self.truncate, self._info()

        def render(self):
            return np.full((4, 5, 3), self.t, np.uint8)

    env_id = "RLAdaptersToy-v0"
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=ToyEnv)
    return env_id
