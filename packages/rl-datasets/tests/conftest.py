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


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """A local stand-in of the Hugging Face hub: ``hub.repo("owner/name")`` is a folder whose
    files the hub client downloads (``huggingface_hub`` pointed at it)."""
    constants = pytest.importorskip("huggingface_hub.constants")

    class Hub:
        def __init__(self):
            self.repos = {}
            self.server = None

        def repo(self, repo_id):
            folder = tmp_path / "hub" / repo_id
            folder.mkdir(parents=True, exist_ok=True)
            self.repos[f"datasets/{repo_id}"] = folder
            return folder

    hub = Hub()
    with LocalFileServer(tmp_path, hub_repos=hub.repos) as server:
        hub.server = server
        endpoint = server.url.rstrip("/")
        monkeypatch.setattr(constants, "ENDPOINT", endpoint)
        monkeypatch.setattr(
            constants,
            "HUGGINGFACE_CO_URL_TEMPLATE",
            endpoint + "/{repo_id}/resolve/{revision}/{filename}",
        )
        monkeypatch.setenv("HF_HUB_OFFLINE", "0")
        monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        yield hub
