"""The mini audit upstream in a workspace, for the audit tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from testing.auditupstream import audit_upstream
from testing.gitutil import Repo
from testing.workspace import Workspace


@pytest.fixture
def mini(tmp_path: Path) -> tuple[Workspace, Repo]:
    repo = audit_upstream(tmp_path / "mini")
    root = tmp_path / "ws"
    root.mkdir()
    ws = Workspace(root, {"mini": repo})
    ws.write_config()
    return ws, repo
