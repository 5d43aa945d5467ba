"""The workspace keeps its promises: narrow interfaces and separately buildable wheels."""

from __future__ import annotations

import ast
import importlib
import re
import shutil
import subprocess
import sys
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


def _sources() -> list[tuple[str, Path]]:
    return [
        (dist, path) for dist in DISTS for path in sorted((PACKAGES / dist / "src").rglob("*.py"))
    ]


def _doorway_violations(dist: str, path: Path) -> list[str]:
    """Names ``path`` takes from another distribution other than through its doorways.

    A sibling may import a package's ``__all__`` names, and the ``__all__`` names of
    its public (non-underscore) modules, such as ``rl_envs_core.extension``; a public
    module without ``__all__`` offers nothing.
    """
    own, found = _module(dist), []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top in MODULES and top != own and "._" in f".{alias.name}":
                    found.append(f"line {node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            top = node.module.split(".")[0]
            if top not in MODULES or top == own:
                continue
            if any(part.startswith("_") for part in node.module.split(".")):
                found.append(f"line {node.lineno}: from {node.module} (a private module)")
                continue
            offered = getattr(importlib.import_module(node.module), "__all__", ())
            for alias in node.names:
                dunder = alias.name.startswith("__") and alias.name.endswith("__")
                if alias.name != "*" and not dunder and alias.name not in offered:
                    found.append(
                        f"line {node.lineno}: {node.module}.{alias.name} (not in its __all__)"
                    )
    return found


def test_no_private_name_is_imported_across_distributions():
    bad = {
        str(path.relative_to(ROOT)): found
        for dist, path in _sources()
        if (found := _doorway_violations(dist, path))
    }
    assert bad == {}, (
        f"import only another distribution's __all__ names or its extension module's: {bad}"
    )


def test_the_doorway_check_catches_private_names(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from rl_envs_core import EnvBase\n"
        "from rl_envs_core import _env_base\n"
        "from rl_envs_core._td import get_entry\n"
        "from rl_envs_core.extension import next_of, _td\n"
        "import rl_specs._base\n"
    )
    found = _doorway_violations("rl-transforms", probe)
    assert [line.split(":")[0] for line in found] == ["line 2", "line 3", "line 4", "line 5"]


#: modules that write ``obj.__dict__[...]`` of objects other than ``self``: each
#: writes objects of its own distribution (never another distribution's)
_OWN_DICT_WRITES = {
    "packages/rl-envs-core/src/rl_envs_core/_spec_views.py": "EnvBase's stored specs",
    "packages/rl-transforms/src/rl_transforms/_base.py": "Transform's key lists and caches",
}


def _foreign_dict_writes(path: Path) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        targets = node.targets if isinstance(node, ast.Assign) else []
        values = [node.value] if isinstance(node, ast.Assign) else []
        for expr in [*targets, *values]:
            if isinstance(expr, ast.Subscript):
                expr = expr.value
            if (
                isinstance(expr, ast.Attribute)
                and expr.attr == "__dict__"
                and not (isinstance(expr.value, ast.Name) and expr.value.id in {"self", "cls"})
            ):
                lines.append(node.lineno)
    return lines


def test_no_dict_writes_into_other_objects_outside_the_known_places():
    bad = {
        rel: lines
        for _, path in _sources()
        if (rel := str(path.relative_to(ROOT))) not in _OWN_DICT_WRITES
        and (lines := _foreign_dict_writes(path))
    }
    assert bad == {}, (
        "write another object's attributes through its public API (for an env's specs: "
        f"rl_envs_core.extension.install_stacked_specs), not its __dict__: {bad}"
    )


#: tensordict's (and torch's pytree's) private names the packages use
_TD_PRIVATE = re.compile(
    r"_new_unsafe|\._tensordict\b|_set_str\b|_td_dim_names|_maybe_names|\b_pytree\b"
)


def test_tensordict_private_api_lives_in_one_module_per_distribution():
    outside = {
        str(path.relative_to(ROOT)): lines
        for _, path in _sources()
        if path.name != "_td.py"
        and (
            lines := [
                n
                for n, line in enumerate(path.read_text().splitlines(), 1)
                if _TD_PRIVATE.search(line) and not line.lstrip().startswith("#")
            ]
        )
    }
    assert outside == {}, (
        "use tensordict's private API only in the distribution's _td.py, with a comment "
        f"saying why the public API does not serve: {outside}"
    )


def _runtime_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import of ``tree`` that runs (those under ``if TYPE_CHECKING:`` do not)."""
    typing_only = set()
    for node in ast.walk(tree):
        test = getattr(node, "test", None)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(test):
            typing_only.update(id(n) for sub in node.body for n in ast.walk(sub))
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in typing_only
    ]


def _module_graph(dist: str) -> dict[str, set[str]]:
    """module -> the modules of the same distribution it imports at run time."""
    src = PACKAGES / dist / "src"
    paths = {}
    for path in src.rglob("*.py"):
        parts = list(path.relative_to(src).with_suffix("").parts)
        paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for name, path in paths.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        edges = set()
        for node in _runtime_imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in paths)
                continue
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            subs = [f"{module}.{a.name}" for a in node.names]
            edges.update(s for s in subs if s in paths)
            if module in paths and any(s not in paths for s in subs):
                edges.add(module)  # names of the module itself (not submodules)
        graph[name] = edges - {name}
    return graph


@pytest.mark.parametrize("dist", DISTS)
def test_no_import_cycle_inside_a_distribution(dist):
    graph, done = _module_graph(dist), set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, f"import cycle: {' -> '.join((*path, module))}"
        if module not in done:
            for dep in sorted(graph[module]):
                visit(dep, (*path, module))
            done.add(module)

    for module in sorted(graph):
        visit(module, ())


def test_the_cycle_check_sees_a_cycle(tmp_path, monkeypatch):
    src = tmp_path / "packages" / "rl-probe" / "src" / "rl_probe"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text("")
    (src / "_a.py").write_text("from rl_probe import _b\n")
    (src / "_b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from rl_probe import _c\n"
        "def f():\n    from . import _a\n"
    )
    (src / "_c.py").write_text("from rl_probe._b import f\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGES", tmp_path / "packages")
    graph = _module_graph("rl-probe")
    assert graph["rl_probe._a"] == {"rl_probe._b"} and graph["rl_probe._b"] == {"rl_probe._a"}
    assert graph["rl_probe._c"] == {"rl_probe._b"}


def test_no_module_is_over_600_lines():
    long = {
        str(path.relative_to(ROOT)): n
        for _, path in _sources()
        if (n := len(path.read_text().splitlines())) > 600
    }
    assert long == {}, f"split these modules (one concept each, at most 600 lines): {long}"
