"""set_gym_backend / gym_backend: selection by name or module, as context and decorator."""

from __future__ import annotations

import sys
import types

import pytest

from rl_env_adapters import gym_backend, implement_for, set_gym_backend
from rl_env_adapters._gym import _backend

gymnasium = pytest.importorskip("gymnasium")


@pytest.fixture
def fake_gym(monkeypatch):
    """A stand-in for the legacy ``gym`` package (not installed here)."""
    module = types.ModuleType("gym")
    module.__version__ = "0.26.2"
    monkeypatch.setitem(sys.modules, "gym", module)
    return module


class TestGymBackend:
    def test_default_is_gymnasium(self, monkeypatch):
        monkeypatch.setitem(_backend._state, "backend", None)
        assert gym_backend() is gymnasium

    @pytest.mark.parametrize("submodule", ["spaces", "wrappers", "vector"])
    def test_submodule(self, submodule):
        with set_gym_backend("gymnasium"):
            assert gym_backend(submodule).__name__ == f"gymnasium.{submodule}"

    def test_unknown_submodule_raises(self):
        with set_gym_backend("gymnasium"), pytest.raises(ImportError, match="does not exist"):
            gym_backend("no_such_submodule")

    def test_no_backend_installed_names_the_extra(self, monkeypatch):
        monkeypatch.setitem(_backend._state, "backend", None)
        monkeypatch.setattr(_backend, "is_installed", lambda name: False)
        with pytest.raises(ImportError, match=r"pip install 'rl-env-adapters\[gym\]'"):
            gym_backend()


class TestSetGymBackend:
    @pytest.mark.parametrize("how", ["module", "name"])
    def test_context_manager(self, fake_gym, how):
        backend = fake_gym if how == "module" else "gym"
        with set_gym_backend(backend):
            assert gym_backend() is fake_gym
        assert gym_backend() is not fake_gym

    def test_nested_contexts_restore(self, fake_gym):
        with set_gym_backend("gymnasium"):
            with set_gym_backend(fake_gym):
                assert gym_backend() is fake_gym
            assert gym_backend() is gymnasium

    def test_decorator(self, fake_gym):
        @set_gym_backend("gym")
        def current():
            return gym_backend()

        assert current() is fake_gym
        assert gym_backend() is not fake_gym

    def test_set_is_permanent(self, fake_gym, monkeypatch):
        monkeypatch.setitem(_backend._state, "backend", gymnasium)
        set_gym_backend(fake_gym).set()
        assert gym_backend() is fake_gym
        set_gym_backend(gymnasium).set()
        assert gym_backend() is gymnasium

    def test_drives_implement_for(self, fake_gym):
        @implement_for("gym", "0.26", None)
        def which():
            return "gym"

        @implement_for("gymnasium", "1.0", None)
        def which():  # noqa: F811
            return "gymnasium"

        with set_gym_backend(fake_gym):
            assert which() == "gym"
        with set_gym_backend(gymnasium):
            assert which() == "gymnasium"

    def test_bad_type_raises(self):
        with pytest.raises(TypeError, match="module or a module name"):
            set_gym_backend(3)

    def test_unknown_name_raises(self):
        with pytest.raises(ImportError, match=r"no_such_gym_rl.*rl-env-adapters\[gym\]"):
            set_gym_backend("no_such_gym_rl")
