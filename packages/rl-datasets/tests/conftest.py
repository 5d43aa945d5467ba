"""Shared fixtures: a local HTTP server and a dataset root, so that no test needs the network."""

from __future__ import annotations

import pytest

from rl_datasets.testing import LocalFileServer


@pytest.fixture
def served(tmp_path):
    """A LocalFileServer over ``tmp_path / "remote"`` (files written there are served)."""
    remote = tmp_path / "remote"
    remote.mkdir()
    with LocalFileServer(remote) as server:
        yield server


@pytest.fixture
def root(tmp_path):
    return tmp_path / "root"
