"""The autopilot's dry run works on a copy of the workspace: it must read the
workspace's configuration and pending conflicts as the real run would."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from testing.autopilot_scene import IDENTITY, Scene, patched
from testing.fake_github import FakeGitHub, fake_github_fixture  # noqa: F401
from testing.gitutil import Repo, git
from testing.workspace import run_contrib


@pytest.fixture
def scene(tmp_path: Path, upstream: Repo, fake_github: FakeGitHub,
          monkeypatch: pytest.MonkeyPatch) -> Scene:
    monkeypatch.setenv("GITHUB_TOKEN", fake_github.token)
    return Scene(tmp_path, upstream, fake_github, prs="create")


def _rows(doc: dict[str, Any]) -> dict[str, list[str]]:
    return {p["patchset"]: [a["result"] for a in p["actions"] if a["step"] == "sync"]
            for p in doc["patchsets"]}


def _conflict(scene: Scene) -> None:
    assert scene.run()[0] == 0
    scene.upstream.commit("core: f3 returns 3 + 0", {
        "pkg/core.py": patched("    return 3\n", "    return 3 + 0\n")})
    done = run_contrib("sync", "proj/f3", cwd=scene.root)
    assert done.code == 1, done.err


def test_a_relative_upstream_url_is_relative_to_the_workspace(scene: Scene) -> None:
    config = scene.root / "contrib.toml"
    relative = os.path.relpath(scene.upstream.path, scene.root)
    config.write_text(config.read_text().replace(f'url = "{scene.upstream.path}"',
                                                 f'url = "{relative}"'))
    git(scene.root, "commit", "-qam", "relative url", env=IDENTITY)
    scene.upstream.commit("docs: more", {"docs/more.md": "more\n"})
    code, doc, err = scene.run(dry_run=True)
    assert code == 0, (doc, err)
    assert _rows(doc) == {"proj/f3": ["rebased"], "proj/f7": ["rebased"]}


def test_a_pending_conflict_is_reported_not_an_error_and_kept(scene: Scene) -> None:
    _conflict(scene)
    state = scene.root / ".contrib" / "sync-state.json"
    before = state.read_bytes()
    code, doc, err = scene.run(dry_run=True)
    assert code == 1, (doc, err)
    assert _rows(doc)["proj/f3"] == ["conflict"]
    needs = [n["kind"] for p in doc["patchsets"] for n in p["needs"]]
    assert needs == ["conflict"], doc
    assert state.read_bytes() == before  # the user's pending conflict is untouched


def test_a_moved_workspace_keeps_its_pending_conflict(scene: Scene, tmp_path: Path) -> None:
    _conflict(scene)
    moved = tmp_path / "elsewhere" / "ws"
    shutil.copytree(scene.root, moved, symlinks=True)
    status = run_contrib("status", "--no-fetch", "--json", cwd=moved)
    assert status.code == 0, status.err
    sync = run_contrib("sync", "--no-fetch", "--json", "proj/f3", cwd=moved)
    assert sync.code == 1, sync.err
    [row] = json.loads(sync.out)["results"]
    assert row["result"] == "conflict" and "remove it" not in sync.err
    state = json.loads((moved / ".contrib" / "sync-state.json").read_text())
    assert "proj/f3" in state["pending"]
