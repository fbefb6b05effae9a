"""The mini enable upstream in a workspace."""

from __future__ import annotations

from pathlib import Path

import pytest

from testing.enableupstream import enable_upstream
from testing.gitutil import Repo
from testing.workspace import Workspace


@pytest.fixture
def mini(tmp_path: Path) -> tuple[Workspace, Repo]:
    repo = enable_upstream(tmp_path / "mini")
    root = tmp_path / "ws"
    root.mkdir()
    ws = Workspace(root, {"mini": repo})
    ws.write_config()
    return ws, repo
