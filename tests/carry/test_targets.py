"""One patchset carried on several branches: a release line and main, each its own state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from testing.fake_github import FakeGitHub, fake_github_fixture  # noqa: F401
from testing.gitutil import Repo, git
from testing.pr_scene import TARGET, Scene
from testing.synchelp import CORE, F3_PATCH, add_patchset
from testing.workspace import Workspace

F3_OTHER = CORE.replace("    return 3\n", "    return 3 * 1\n")


def _targets(ws: Workspace, name: str, *branches: str) -> Path:
    path = ws.root / "patchsets" / "proj" / name / "patchset.toml"
    listed = ", ".join(f'"{b}"' for b in branches)
    path.write_text(f"targets = [{listed}]\n" + path.read_text(), encoding="utf-8")
    return path


def _release_branch(upstream: Repo) -> None:
    """release-1 from the current main; then both lines move on, apart."""
    git(upstream.path, "branch", "release-1")
    git(upstream.path, "checkout", "-q", "release-1")
    upstream.commit("release: a fix for 1.0.post1", {"docs/post1.md": "post1\n"})
    git(upstream.path, "checkout", "-q", "main")


def _results(ws: Workspace, *args: str) -> tuple[int, dict[str, dict[str, Any]]]:
    result = ws.run("sync", "--json", *args)
    doc = result.json
    assert isinstance(doc, dict) and "results" in doc, (result.out, result.err)
    return result.code, {r["patchset"]: r for r in doc["results"]}


@pytest.fixture
def lines(workspace: Workspace, upstream: Repo, tmp_path: Path) -> Workspace:
    add_patchset(workspace, upstream, tmp_path, "x", [("core: f3 = 33", {"pkg/core.py": F3_PATCH})])
    _release_branch(upstream)
    _targets(workspace, "x", "release-1", "main")
    return workspace


def test_rebased_on_the_release_line_upstreamed_on_main(lines: Workspace, upstream: Repo) -> None:
    landed = upstream.commit("core: f3 returns 33 (#12)", {"pkg/core.py": F3_PATCH})
    code, results = _results(lines)
    assert code == 0 and set(results) == {"proj/x@release-1", "proj/x@main"}
    assert results["proj/x@release-1"]["result"] == "rebased"
    assert results["proj/x@main"]["result"] == "upstreamed"
    assert results["proj/x@main"]["upstreamed"][0]["commit"]["sha"] == landed
    status = lines.run("status", "--no-fetch", "--json").json
    assert isinstance(status, dict)
    rows = {r["patchset"]: r for r in status["patchsets"]}
    assert rows["proj/x@release-1"]["branch"] == "release-1" and rows["proj/x@release-1"]["behind"] == 0
    assert rows["proj/x@main"]["branch"] == "main"
    assert rows["proj/x@main"]["upstream_status"] == "Upstreamed"
    assert rows["proj/x@release-1"]["upstream_status"] == "Pending"
    text = (lines.root / "patchsets/proj/x/patchset.toml").read_text()
    assert '[target.main]' in text and 'upstream_status = "Upstreamed"' in text
    again, results = _results(lines)
    assert again == 0 and {r["result"] for r in results.values()} == {"unchanged", "upstreamed"}


def test_a_conflict_on_one_target_does_not_stop_the_other(lines: Workspace,
                                                          upstream: Repo) -> None:
    upstream.commit("core: f3 differently", {"pkg/core.py": F3_OTHER})
    code, results = _results(lines)
    assert code == 1
    assert results["proj/x@release-1"]["result"] == "rebased"
    assert results["proj/x@main"]["result"] == "conflict"
    one, only = _results(lines, "proj/x@release-1")
    assert one == 0 and set(only) == {"proj/x@release-1"}


def test_a_target_the_upstream_lacks_is_exit_2_naming_the_line(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    add_patchset(workspace, upstream, tmp_path, "x", [("core: f3 = 33", {"pkg/core.py": F3_PATCH})])
    path = _targets(workspace, "x", "release-9", "main")
    result = workspace.run("sync")
    assert result.code == 2 and f"{path}:1:" in result.err and "release-9" in result.err
    assert result.err.count("contrib: error:") == 1 and "fix targets" in result.err


def test_two_targets_get_two_prs_each_against_its_own_base(
        tmp_path: Path, upstream: Repo, fake_github: FakeGitHub,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", fake_github.token)
    scene = Scene(tmp_path, upstream, fake_github)
    _release_branch(upstream)
    ws = Workspace(scene.root, {"proj": upstream})
    _targets(ws, "sm120", "main", "release-1")
    code, results = scene.run(TARGET)
    assert code == 0, results
    by_base = {r["base"]: r for r in results}
    assert set(by_base) == {"main", "release-1"}
    assert by_base["main"]["head"].endswith(":contrib/sm120--main")
    assert by_base["release-1"]["head"].endswith(":contrib/sm120--release-1")
    pulls = scene.prs()
    assert sorted(p["base"]["ref"] for p in pulls) == ["main", "release-1"]
    release = next(p for p in pulls if p["base"]["ref"] == "release-1")
    assert "This PR is for the `release-1` line" in release["body"]
    again, results = scene.run(TARGET)
    assert again == 0 and len(scene.prs()) == 2  # kept current, never a second PR per line


def test_no_pr_where_the_change_is_upstreamed(lines: Workspace, upstream: Repo) -> None:
    upstream.commit("core: f3 returns 33 (#12)", {"pkg/core.py": F3_PATCH})
    assert _results(lines)[0] == 0
    result = lines.run("open-pr", "--dry-run", "--json", "proj/x@main")
    doc = result.json
    assert isinstance(doc, dict) and "results" in doc, (result.out, result.err)
    [only] = doc["results"]
    assert only["result"] == "upstreamed" and only["base"] == "main"
