"""The workspace keeps its promises: narrow interfaces and separately buildable wheels."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ROOT / "packages"
DISTS = sorted(p.parent.name for p in PACKAGES.glob("*/pyproject.toml"))


def _module(dist: str) -> str:
    return dist.replace("-", "_")


def _declared_siblings(dist: str) -> set[str]:
    project = tomllib.loads((PACKAGES / dist / "pyproject.toml").read_text())["project"]
    names = {re.split(r"[<>=!\[ ;]", req, maxsplit=1)[0] for req in project["dependencies"]}
    return {name for name in names if name in DISTS}


def _rl_imports(dist: str) -> set[tuple[str, Path]]:
    """(imported rl_* module path, file) for every import in the distribution's sources."""
    found = set()
    for path in (PACKAGES / dist / "src").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            found.update((name, path) for name in names if name.split(".")[0] in MODULES)
    return found


MODULES = {_module(d): d for d in DISTS}


@pytest.mark.parametrize("dist", DISTS)
def test_distribution_imports_only_declared_siblings(dist):
    allowed = _declared_siblings(dist) | {dist}
    undeclared = {
        (name, str(path.relative_to(ROOT)))
        for name, path in _rl_imports(dist)
        if MODULES[name.split(".")[0]] not in allowed
    }
    assert undeclared == set(), f"{dist} imports siblings its pyproject does not declare"


@pytest.mark.parametrize("dist", DISTS)
def test_distribution_uses_only_public_modules_of_siblings(dist):
    private = {
        (name, str(path.relative_to(ROOT)))
        for name, path in _rl_imports(dist)
        if name.split(".")[0] != _module(dist) and any(p.startswith("_") for p in name.split("."))
    }
    assert private == set(), f"{dist} reaches into private modules of another distribution"


def test_dependency_graph_is_acyclic():
    graph = {dist: _declared_siblings(dist) for dist in DISTS}
    done: set[str] = set()

    def visit(dist: str, path: tuple[str, ...]) -> None:
        assert dist not in path, f"import cycle: {' -> '.join((*path, dist))}"
        if dist not in done:
            for dep in graph[dist]:
                visit(dep, (*path, dist))
            done.add(dist)

    for dist in DISTS:
        visit(dist, ())


def test_meta_package_depends_on_every_other_distribution():
    assert _declared_siblings("rl-stack") == set(DISTS) - {"rl-stack"}


@pytest.mark.parametrize("dist", DISTS)
def test_every_distribution_ships_readme_and_py_typed(dist):
    assert (PACKAGES / dist / "README.md").read_text().strip()
    assert (PACKAGES / dist / "src" / _module(dist) / "py.typed").exists()


@pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not on PATH")
@pytest.mark.parametrize("dist", DISTS)
def test_distribution_builds_as_a_wheel_on_its_own(dist, tmp_path):
    subprocess.run(
        ["uv", "build", "--package", dist, "--wheel", "--out-dir", str(tmp_path), "--quiet"],
        cwd=ROOT,
        check=True,
    )
    wheels = list(tmp_path.glob(f"{_module(dist)}-*.whl"))
    assert len(wheels) == 1
