"""Sphinx configuration of the rl-stack documentation (built by ``nox -s docs``)."""

from __future__ import annotations

import importlib
from importlib import metadata
from pathlib import Path

from sphinx.util import logging

ROOT = Path(__file__).resolve().parent.parent
BENCHMARK_RESULTS = ROOT / "benchmarks" / "results" / "latest.md"
BENCHMARK_MARKER = "<!-- benchmark results are inserted here -->"

project = "rl-stack"
author = "the rl-stack developers"
copyright = "the rl-stack developers"
release = metadata.version("rl-stack")
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "README.md"]
myst_heading_anchors = 3
# myst.header: the pasted benchmark tables start at level-3 headings.
# ref.python: "see :class:`X`" fields resolve `device` and such to several classes' attributes.
suppress_warnings = ["myst.header", "ref.python"]

autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
napoleon_google_docstring = True
napoleon_numpy_docstring = False

html_theme = "alabaster"
html_title = f"rl-stack {release}"


def _insert_benchmarks(app, docname: str, source: list[str]) -> None:
    """Paste ``benchmarks/results/latest.md`` into the benchmarks page when it exists."""
    if docname != "benchmarks" or BENCHMARK_MARKER not in source[0]:
        return
    if BENCHMARK_RESULTS.exists():
        tables = BENCHMARK_RESULTS.read_text()
    else:
        tables = "*No results yet: run `nox -s bench` to produce `benchmarks/results/latest.md`.*"
    source[0] = source[0].replace(BENCHMARK_MARKER, tables)


def _join_wrapped_names(app, what, name, obj, options, lines: list[str]) -> None:
    """Join an ``Args:`` entry naming several parameters whose name list wraps a line.

    Some docstrings document many parameters at once (``a, b,`` then ``c, d: as in X``
    on the next line); napoleon reads only single-line name lists, so the continuation
    is merged into the first line before napoleon parses the section.
    """
    i = 0
    while i < len(lines) - 1:
        line, nxt = lines[i], lines[i + 1]
        if line.rstrip().endswith(",") and ":" not in line and ":" in nxt:
            indent = len(line) - len(line.lstrip())
            if len(nxt) - len(nxt.lstrip()) >= indent and line.strip()[0].isidentifier():
                lines[i] = f"{line.rstrip()} {nxt.strip()}"
                del lines[i + 1]
                continue
        i += 1


API_MODULES = (
    "rl_specs",
    "rl_envs_core",
    "rl_transforms",
    "rl_batched_envs",
    "rl_replay",
    "rl_datasets",
    "rl_env_adapters",
)


def _check_api_complete(app, env) -> None:
    """Warn (an error under ``-W``) for a name of an ``__all__`` the API pages left out."""
    documented = set(env.get_domain("py").objects)
    for module_name in API_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            if f"{module_name}.{name}" not in documented:
                logging.getLogger(__name__).warning(
                    f"{module_name}.{name} is in {module_name}.__all__ but not in the API "
                    f"reference. Give it a docstring or list it in docs/api/{module_name}.rst."
                )


def _skip_tensordict_members(app, what, name, obj, skip, options):
    """Leave out the methods a tensorclass (``Tree``) gets from tensordict: documented there."""
    if what == "class" and getattr(obj, "__module__", "").startswith("tensordict"):
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_tensordict_members)
    app.connect("env-check-consistency", _check_api_complete)
    app.connect("source-read", _insert_benchmarks)
    app.connect("autodoc-process-docstring", _join_wrapped_names, priority=100)
