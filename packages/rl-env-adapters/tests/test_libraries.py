"""get_available_libraries and the missing-backend error helper."""

from __future__ import annotations

import importlib.util

import pytest

from rl_env_adapters import get_available_libraries
from rl_env_adapters._errors import import_backend, missing_backend


class TestGetAvailableLibraries:
    def test_reports_installed_state(self):
        libs = get_available_libraries()
        assert set(libs) == {"gym", "gymnasium", "envpool"}
        for name, available in libs.items():
            assert available is (importlib.util.find_spec(name) is not None)


class TestMissingBackend:
    @pytest.mark.parametrize(("extra", "module"), [("gym", "gymnasium"), ("envpool", "envpool")])
    def test_message_names_the_extra(self, extra, module):
        err = missing_backend("Owner", module, extra)
        assert isinstance(err, ImportError)
        assert f"pip install 'rl-env-adapters[{extra}]'" in str(err)

    def test_import_backend_raises_install_line(self):
        with pytest.raises(ImportError, match=r"Thing needs no_such_mod_rl.*\[envpool\]"):
            import_backend("no_such_mod_rl", owner="Thing", extra="envpool")

    def test_import_backend_returns_module(self):
        assert import_backend("json", owner="Thing", extra="gym").__name__ == "json"


class TestMissingBackendAtConstruction:
    """Classes import their backend when built; its absence names the extra."""

    def test_envpool_classes(self, monkeypatch):
        import sys

        from rl_env_adapters import MultiThreadedEnv, MultiThreadedEnvWrapper

        monkeypatch.setitem(sys.modules, "envpool", None)
        for build in (
            lambda: MultiThreadedEnv(2, "CartPole-v1"),
            lambda: MultiThreadedEnvWrapper(None),
        ):
            with pytest.raises(ImportError, match=r"pip install 'rl-env-adapters\[envpool\]'"):
                build()

    def test_gym_env(self, monkeypatch):
        from rl_env_adapters import GymEnv
        from rl_env_adapters._gym import _backend

        monkeypatch.setitem(_backend._state, "backend", None)
        monkeypatch.setattr(_backend, "is_installed", lambda name: False)
        with pytest.raises(ImportError, match=r"pip install 'rl-env-adapters\[gym\]'"):
            GymEnv("CartPole-v1")
