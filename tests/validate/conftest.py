"""Fixtures for the validate tests: the mini-upstream as trees and as a workspace."""

from __future__ import annotations

from pathlib import Path

import pytest

from testing import miniupstream as mu
from testing.gitutil import Repo
from testing.trees import base_tree, full_fix_tree, gate_only_tree, sm120
from testing.workspace import Workspace

__all__ = ["base_tree", "full_fix_tree", "gate_only_tree", "sm120"]


@pytest.fixture
def fi(tmp_path: Path) -> Workspace:
    """A workspace carrying patches for a mini flashinfer-shaped upstream."""
    repo = Repo(tmp_path / "flashinfer")
    repo.commit("Initial import", mu.files("base"))
    root = tmp_path / "ws"
    root.mkdir()
    ws = Workspace(root, {"flashinfer": repo})
    ws.write_config()
    return ws
