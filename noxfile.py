"""Test, lint, docs and benchmark sessions for the rl-stack workspace.

``nox`` (no arguments) runs the test sessions: one ``unit`` session per
distribution, each in a fresh virtualenv holding only that distribution and its
declared dependencies, then ``extras``, ``integration``, ``docs`` and ``lint``.
``nox -s bench`` runs the side-by-side benchmarks (it builds a peer venv with
TorchRL first). ``tensordict-oldest`` / ``tensordict-newest`` run the tests of the
code that touches tensordict's internals on the oldest tensordict the pyprojects
allow and on the newest release.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import tomllib
from pathlib import Path

import nox

ROOT = Path(__file__).parent
PACKAGES = ROOT / "packages"

nox.options.default_venv_backend = "uv"
nox.options.reuse_existing_virtualenvs = False
nox.options.sessions = [
    "unit",
    "extras",
    "integration",
    "tensordict-oldest",
    "tensordict-newest",
    "docs",
    "lint",
]

# nox points TMPDIR into each session's folder; Ray puts its AF_UNIX sockets under its temp
# dir, whose path must stay under 108 bytes, so Ray's sessions go to the machine's own tmp.
os.environ.setdefault("RAY_TMPDIR", tempfile.gettempdir())

# The torch release CI tests against. `RL_STACK_TORCH="torch>=2.5"` tests another one.
TORCH = os.environ.get("RL_STACK_TORCH", "torch==2.13.0")
TEST_TOOLS = ["pytest>=8", "hypothesis>=6"]
# Every distribution, editable, with the backends the integration tests and benchmarks use
# (gymnasium's classic-control renderer for the seed examples that record videos; the
# hub-hosted datasets and h5py for the datasets examples; ray for the Ray collector + buffer
# integration test, the "Scaling out with Ray" guide and its benchmark).
FULL_STACK = [
    "-e",
    "packages/rl-stack[gym,envpool,video]",
    "-e",
    "packages/rl-replay[h5,ray]",
    "-e",
    "packages/rl-datasets[hub]",
    "gymnasium[classic-control]",
]


def _pyproject(dist: str) -> dict:
    return tomllib.loads((PACKAGES / dist / "pyproject.toml").read_text())


MEMBERS = sorted(p.parent.name for p in PACKAGES.glob("*/pyproject.toml"))


# An extra whose requirements all belong to another extra of the same distribution is
# tested by that extra's session (rl-datasets[h5] by rl-datasets[hub]).
def _covered(extras: dict[str, list[str]], extra: str) -> bool:
    return any(o != extra and set(extras[extra]) < set(extras[o]) for o in extras)


# (distribution, extra) pairs whose tests need a backend (rl-stack's demo tests need gym).
EXTRAS = [
    (dist, extra)
    for dist in MEMBERS
    for extras in [_pyproject(dist)["project"].get("optional-dependencies", {})]
    for extra in extras
    if not _covered(extras, extra)
]


def _find_links() -> str | None:
    """The wheel folders pip is configured with, so uv finds the same local wheels (a CPU torch)."""
    links = os.environ.get("PIP_FIND_LINKS")
    if links:
        return links
    out = subprocess.run(
        ["python3", "-m", "pip", "config", "get", "global.find-links"],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.strip() or None


def _locked_constraints(session: nox.Session) -> str:
    """uv.lock exported as a constraints file: sessions install the locked versions.

    The sessions install with ``uv pip`` rather than ``uv sync`` so that torch can come
    from pip's find-links (a CPU wheel) instead of the lock's CUDA build.
    """
    path = Path(session.create_tmp()) / "constraints.txt"
    session.run_install(
        "uv",
        "export",
        "--frozen",
        "--all-packages",
        "--all-extras",
        "--no-hashes",
        "--no-emit-workspace",
        "--no-header",
        "--no-annotate",
        "--quiet",
        "-o",
        str(path),
        external=True,
        silent=True,
    )
    return str(path)


def _install(session: nox.Session, *requirements: str, unlocked: str | None = None) -> None:
    """Install with the locked versions (but for the ``unlocked`` distribution)."""
    links = _find_links()
    env = {"UV_FIND_LINKS": links} if links else {}
    constraints = _locked_constraints(session)
    if unlocked is not None:
        path = Path(constraints)
        lines = path.read_text().splitlines()
        path.write_text("\n".join(x for x in lines if not x.startswith(f"{unlocked}==")) + "\n")
    session.install("-c", constraints, TORCH, *requirements, env=env)


def _module(dist: str) -> str:
    return dist.replace("-", "_")


def _run_tests(session: nox.Session, dist: str, *marks: str) -> None:
    src = f"packages/{dist}/src/{_module(dist)}"
    args = ["pytest", f"packages/{dist}/tests", "--doctest-modules", src, *marks, *session.posargs]
    session.run(*args)


@nox.session
@nox.parametrize("dist", MEMBERS)
def unit(session: nox.Session, dist: str) -> None:
    """Install one distribution with its declared dependencies only; run its tests and doctests."""
    _install(session, "-e", f"packages/{dist}", *TEST_TOOLS)
    _run_tests(session, dist)


def _requirement(req: str) -> tuple[str, list[str]]:
    """``"name[e1,e2]>=1"`` -> ``("name", ["e1", "e2"])`` (names normalised to dashes)."""
    match = re.match(r"\s*([A-Za-z0-9_.-]+)\s*(?:\[([^\]]*)\])?", req)
    name = match.group(1).lower().replace("_", "-")
    return name, [e.strip() for e in (match.group(2) or "").split(",") if e.strip()]


def _extra_backends(dist: str, extra: str) -> tuple[set[str], set[str]]:
    """What ``dist[extra]`` adds to ``dist``: (third-party distributions, sibling modules).

    Extras of siblings (``rl-stack[gym]`` = ``rl-env-adapters[gym]``) are followed;
    a sibling that ``dist`` already depends on is not a backend.
    """
    project = _pyproject(dist)["project"]
    base = {_requirement(r)[0] for r in project["dependencies"]}
    third_party, siblings = set(), set()
    for req in project.get("optional-dependencies", {}).get(extra, []):
        name, sub_extras = _requirement(req)
        if name in MEMBERS:
            if name not in base:
                siblings.add(_module(name))
            for sub in sub_extras:
                more, more_siblings = _extra_backends(name, sub)
                third_party |= more
                siblings |= more_siblings
        else:
            third_party.add(name)
    return third_party, siblings


# the top-level modules the given distributions install (run in the session's venv)
_MODULES_OF = """
import importlib.metadata as m, sys
names = {n.lower().replace("_", "-") for n in sys.argv[1:]}
for module, dists in m.packages_distributions().items():
    if module.isidentifier() and any(d.lower().replace("_", "-") in names for d in dists):
        print(module)
"""


def _backend_files(session: nox.Session, dist: str, extra: str) -> list[str]:
    """The test files and source modules of ``dist`` that name a module of ``extra``.

    Everything else already ran in the ``unit`` session, with the same result: code
    that never names a backend cannot behave differently when it is installed.
    """
    third_party, modules = _extra_backends(dist, extra)
    if third_party:
        found = session.run("python", "-c", _MODULES_OF, *sorted(third_party), silent=True)
        modules |= set(found.split())
    if not modules:
        return []
    names = "|".join(re.escape(m) for m in sorted(modules))
    # import statements, and module names as strings (importorskip, find_spec, import_module)
    pattern = re.compile(rf"(?:\bimport\s+|\bfrom\s+|[\"'])(?:{names})\b")
    root = PACKAGES / dist
    tests = sorted(root.glob("tests/**/test_*.py"))
    sources = sorted(root.glob(f"src/{_module(dist)}/**/*.py"))
    return [
        str(path.relative_to(ROOT))
        for path in [*tests, *sources]
        if pattern.search(path.read_text(encoding="utf-8"))
    ]


@nox.session
@nox.parametrize("dist_extra", [f"{d}[{e}]" for d, e in EXTRAS])
def extras(session: nox.Session, dist_extra: str) -> None:
    """Install a distribution with one backend extra; run the tests that need that backend.

    Those are the test files and the doctests of the modules that name one of the
    extra's modules; when none does, the session checks that the package imports
    beside the backend.
    """
    dist, extra = dist_extra[:-1].split("[")
    _install(session, "-e", f"packages/{dist_extra}", *TEST_TOOLS)
    files = _backend_files(session, dist, extra)
    if not files:
        session.log(f"no file of {dist} names a module of [{extra}]: import check only")
        session.run("python", "-c", f"import {_module(dist)}")
        return
    session.log(f"{len(files)} files of {dist} name a module of [{extra}]")
    session.run("pytest", "--doctest-modules", *files, *session.posargs)


@nox.session
def integration(session: nox.Session) -> None:
    """Every distribution together, with the gym and h5 backends: cross-package behaviour."""
    # uv builds each distribution's wheel in the workspace tests
    _install(session, *FULL_STACK, *TEST_TOOLS, "uv>=0.13,<0.14")
    session.run("pytest", "tests-integration", *session.posargs)


def _tensordict_floor() -> str:
    """The lowest tensordict every pyproject accepts (their ``tensordict>=X`` bounds)."""
    floors = []
    for dist in MEMBERS:
        for req in _pyproject(dist)["project"]["dependencies"]:
            if req.replace(" ", "").startswith("tensordict>="):
                floors.append(req.split(">=")[1].split(",")[0].strip())
    return max(floors, key=lambda v: tuple(int(p) for p in v.split(".")))


# The distributions whose own code touches tensordict's internals (their ``_td.py``)
# or leans on its behaviour most, and the tests that exercise those paths: a short
# run (a few minutes) that proves the supported tensordict range on every CI run.
TENSORDICT_DISTS = ["rl-specs", "rl-envs-core", "rl-replay", "rl-batched-envs"]
TENSORDICT_TESTS = [
    "packages/rl-specs/tests/test_composite.py",
    "packages/rl-envs-core/tests",
    "packages/rl-replay/tests/test_storages.py",
    "packages/rl-replay/tests/test_buffer.py",
    "packages/rl-batched-envs/tests/test_fast_paths.py",
]


def _tensordict_session(session: nox.Session, requirement: str) -> None:
    editable = [arg for dist in TENSORDICT_DISTS for arg in ("-e", f"packages/{dist}")]
    _install(session, *editable, *TEST_TOOLS, requirement, unlocked="tensordict")
    session.run("python", "-c", "import tensordict; print('tensordict', tensordict.__version__)")
    session.run("pytest", "-p", "no:cacheprovider", *TENSORDICT_TESTS, *session.posargs)


@nox.session(name="tensordict-oldest")
def tensordict_oldest(session: nox.Session) -> None:
    """The tensordict-facing tests on the oldest tensordict the pyprojects allow."""
    _tensordict_session(session, f"tensordict=={_tensordict_floor()}")


def _locked_version(name: str) -> str | None:
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    return next((p["version"] for p in lock["package"] if p["name"] == name), None)


def _newest_release(name: str) -> str | None:
    """The newest release on the configured index (``None`` when it cannot be asked)."""
    out = subprocess.run(
        ["python3", "-m", "pip", "index", "versions", name],
        capture_output=True,
        text=True,
        check=False,
    )
    match = re.search(rf"^{name} \(([^)]+)\)", out.stdout, re.MULTILINE)
    return match.group(1) if match else None


@nox.session(name="tensordict-newest")
def tensordict_newest(session: nox.Session) -> None:
    """The tensordict-facing tests on the newest tensordict release.

    Skipped (in seconds) while the newest release is the locked one, which the
    ``unit`` sessions already test.
    """
    newest = _newest_release("tensordict")
    if newest is not None and newest == _locked_version("tensordict"):
        session.skip(f"tensordict {newest} is the newest release and the locked one")
    _tensordict_session(session, "tensordict" if newest is None else f"tensordict=={newest}")


@nox.session
def docs(session: nox.Session) -> None:
    """Run every code example of the README and docs/ as a doctest, then build the HTML site.

    ``sphinx-build -W`` turns every warning (a broken docstring, a dangling reference)
    into an error. The site lands in the session's tmp dir; ``nox -s docs -- -k specs``
    passes pytest arguments through.
    """
    _install(session, *FULL_STACK, *TEST_TOOLS, "sphinx>=8", "myst-parser>=4")
    session.run(
        "pytest",
        "--doctest-glob=*.md",
        "-p",
        "no:cacheprovider",
        "README.md",
        "docs",
        *session.posargs,
    )
    html = Path(session.create_tmp()) / "html"
    session.run("sphinx-build", "-W", "--keep-going", "-q", "-b", "html", "docs", str(html))
    session.log(f"HTML documentation: {html / 'index.html'}")


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the whole tree."""
    _install(session, "ruff>=0.9")
    session.run("ruff", "check", ".")


@nox.session
def bench(session: nox.Session) -> None:
    """Side-by-side benchmarks: ours in this session, the peers (TorchRL 0.14) in a peer venv."""
    _install(session, *FULL_STACK)
    links = _find_links()
    env = {"UV_FIND_LINKS": links} if links else {}  # the peer venv takes the same local torch
    session.run("python", "-m", "benchmarks", *session.posargs, env=env)
