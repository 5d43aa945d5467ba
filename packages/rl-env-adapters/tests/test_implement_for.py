"""implement_for: version-range dispatch, tested with fake modules and fake versions."""

from __future__ import annotations

import sys
import types

import pytest

from rl_env_adapters import implement_for


@pytest.fixture
def fake_lib(monkeypatch):
    module = types.ModuleType("fakelib_rl")
    module.__version__ = "0.26.2"
    monkeypatch.setitem(sys.modules, "fakelib_rl", module)
    return module


def _two_ranges(boundary: str):
    @implement_for("fakelib_rl", None, boundary)
    def fun():
        return "old"

    @implement_for("fakelib_rl", boundary, None)
    def fun():  # noqa: F811 - the point of implement_for
        return "new"

    return fun


class TestImplementFor:
    @pytest.mark.parametrize(
        ("version", "boundary", "expected"),
        [
            ("0.26.2", "0.26.0", "new"),
            ("0.25.9", "0.26.0", "old"),
            ("0.26.0", "0.26", "new"),  # from_version is inclusive, trailing zeros ignored
            ("1.0.0a1", "1.0", "new"),
            ("0.9", "0.10", "old"),  # numeric, not lexicographic, comparison
        ],
    )
    def test_picks_the_range_holding_the_version(self, fake_lib, version, boundary, expected):
        fake_lib.__version__ = version
        assert _two_ranges(boundary)() == expected

    def test_last_fitting_implementation_wins_on_overlap(self, fake_lib):
        @implement_for("fakelib_rl", "0.1", None)
        def fun():
            return 1

        @implement_for("fakelib_rl", "0.2", "9.0")
        def fun():  # noqa: F811
            return 2

        assert fun() == 2

    def test_forwards_arguments(self, fake_lib):
        @implement_for("fakelib_rl", "0.1")
        def add(x, *, y):
            return x + y

        assert add(1, y=2) == 3

    def test_callable_module_name(self, fake_lib):
        @implement_for(lambda: fake_lib, "0.26", None)
        def fun():
            return "callable"

        assert fun() == "callable"

    def test_class_method(self, fake_lib):
        class Holder:
            @implement_for("fakelib_rl", "0.1", None, class_method=True)
            def make(cls):
                return cls

        assert Holder.make() is Holder

    def test_compilable_resolves_eagerly(self, fake_lib):
        @implement_for("fakelib_rl", "0.1", None, compilable=True)
        def fun():
            return "eager"

        fake_lib.__version__ = "0.0.1"  # resolved already: stays on the eager pick
        assert fun() == "eager"

    def test_reset_reresolves(self, fake_lib):
        fun = _two_ranges("0.26.0")
        assert fun() == "new"
        fake_lib.__version__ = "0.20.0"
        implement_for.reset()
        assert fun() == "old"

    def test_no_fitting_range_raises(self, fake_lib):
        @implement_for("fakelib_rl", "5.0", None)
        def fun():
            return 0

        with pytest.raises(
            ModuleNotFoundError, match=r"fakelib_rl \[5.0, inf\).*found fakelib_rl 0.26.2"
        ):
            fun()

    def test_missing_module_raises(self):
        @implement_for("no_such_module_rl_xyz", "1.0")
        def fun():
            return 0

        with pytest.raises(ModuleNotFoundError, match="module not installed"):
            fun()

    def test_bad_version_string_raises(self):
        with pytest.raises(ValueError, match="dotted numeric version"):
            implement_for("fakelib_rl", "latest")
