"""Selecting the targets of a patchset carried on several branches, and what every row names."""

from __future__ import annotations

from pathlib import Path

import pytest

from testing.fake_github import FakeGitHub, fake_github_fixture  # noqa: F401
from testing.gitutil import Repo, git
from testing.pr_scene import TARGET, Scene
from testing.synchelp import F3_PATCH, add_patchset, commit_workspace
from testing.workspace import Workspace


def _targets(ws: Workspace, name: str, *branches: str) -> Path:
    path = ws.root / "patchsets" / "proj" / name / "patchset.toml"
    listed = ", ".join(f'"{b}"' for b in branches)
    path.write_text(f"targets = [{listed}]\n" + path.read_text(), encoding="utf-8")
    return path


def _release_branch(upstream: Repo) -> None:
    git(upstream.path, "branch", "release-1")
    git(upstream.path, "checkout", "-q", "release-1")
    upstream.commit("release: a fix for 1.0.post1", {"docs/post1.md": "post1\n"})
    git(upstream.path, "checkout", "-q", "main")


@pytest.fixture
def lines(workspace: Workspace, upstream: Repo, tmp_path: Path) -> Workspace:
    add_patchset(workspace, upstream, tmp_path, "x", [("core: f3 = 33", {"pkg/core.py": F3_PATCH})])
    _release_branch(upstream)
    _targets(workspace, "x", "release-1", "main")
    return workspace


@pytest.mark.parametrize("selector", ["proj//", "proj/@main", "proj@main", "proj/x@",
                                      "proj//x", "proj/x//", "proj/x/@main"])
def test_a_selector_naming_no_patchset_is_exit_2(lines: Workspace, selector: str) -> None:
    result = lines.run("status", "--no-fetch", selector)
    assert result.code == 2 and result.err.count("contrib: error:") == 1, (result.out, result.err)


@pytest.mark.parametrize("selector", ["proj", "proj/", "proj/x", "proj/x/"])
def test_a_folder_the_shell_completed_still_selects(lines: Workspace, selector: str) -> None:
    result = lines.run("status", "--json", selector)
    assert result.code == 0 and isinstance(result.json, dict), result.err
    assert len(result.json["patchsets"]) == 2


def test_every_row_names_its_branch_the_first_target_too(lines: Workspace) -> None:
    sync = lines.run("sync", "--json").json
    assert isinstance(sync, dict)
    assert sorted(r["patchset"] for r in sync["results"]) == ["proj/x@main", "proj/x@release-1"]
    status = lines.run("status", "--no-fetch", "--json").json
    assert isinstance(status, dict)
    assert sorted(r["patchset"] for r in status["patchsets"]) == ["proj/x@main",
                                                                  "proj/x@release-1"]
    assert {r["selector"] for r in status["patchsets"]} == {"proj/x@main", "proj/x@release-1"}
    text = lines.run("status", "--no-fetch").out
    assert "proj/x@release-1" in text and "proj/x@main" in text


def test_sync_commit_takes_a_second_targets_new_version(lines: Workspace,
                                                        upstream: Repo) -> None:
    commit_workspace(lines)
    assert lines.run("sync", "--commit").code == 0
    assert git(lines.root, "status", "--porcelain") == ""
    upstream.commit("docs: main moves alone", {"docs/main.md": "main\n"})  # only main moves
    result = lines.run("sync", "--commit", "--json")
    assert result.code == 0, result.err
    assert git(lines.root, "status", "--porcelain", "--untracked-files=all") == ""
    assert "proj/x@main" in git(lines.root, "log", "-1", "--format=%s")


@pytest.mark.parametrize("command", ["status", "validate"])
def test_a_branch_upstream_lacks_is_exit_2_naming_the_line(
        workspace: Workspace, upstream: Repo, tmp_path: Path, command: str) -> None:
    add_patchset(workspace, upstream, tmp_path, "x", [("core: f3 = 33", {"pkg/core.py": F3_PATCH})])
    path = _targets(workspace, "x", "main", "release-9")
    result = workspace.run(command)
    assert result.code == 2 and f"{path}:1:" in result.err and "release-9" in result.err, (
        result.out, result.err)


def test_a_dangling_symlink_patchset_toml_is_an_error(lines: Workspace) -> None:
    folder = lines.root / "patchsets" / "proj" / "ghost"
    folder.mkdir()
    (folder / "patchset.toml").symlink_to(folder / "gone.toml")
    result = lines.run("status", "--no-fetch")
    assert result.code == 2 and "ghost/patchset.toml" in result.err and "symlink" in result.err


def test_edit_of_several_targets_asks_which(lines: Workspace) -> None:
    result = lines.run("edit", "proj/x")
    assert result.code == 2
    assert "proj/x@release-1" in result.err and "proj/x@main" in result.err
    assert not (lines.root / ".contrib" / "edit").exists()
    chosen = lines.run("edit", "proj/x@main", "--json")
    assert chosen.code == 0, chosen.err
    assert isinstance(chosen.json, dict) and chosen.json["patchset"] == "proj/x@main"


def test_a_title_per_target(tmp_path: Path, upstream: Repo, fake_github: FakeGitHub,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", fake_github.token)
    scene = Scene(tmp_path, upstream, fake_github)
    _release_branch(upstream)
    ws = Workspace(scene.root, {"proj": upstream})
    path = _targets(ws, "sm120", "main", "release-1")
    path.write_text(path.read_text() + '\n[target.release-1]\ntitle = "backport: f3 to 1.0"\n')
    code, results = scene.run(TARGET)
    assert code == 0, results
    assert sorted(r["patchset"] for r in results) == ["proj/sm120@main",
                                                      "proj/sm120@release-1"]
    titles = {p["base"]["ref"]: p["title"] for p in scene.prs()}
    assert titles["release-1"] == "backport: f3 to 1.0"
    assert titles["main"] != titles["release-1"]
    path.write_text(path.read_text().replace('"backport: f3 to 1.0"', '"  "'))
    result = ws.run("status", "--no-fetch")
    assert result.code == 2 and f"{path}:" in result.err and "title" in result.err


def test_landed_on_the_first_target_only_the_second_stays_pending_and_gets_its_pr(
        tmp_path: Path, upstream: Repo, fake_github: FakeGitHub,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", fake_github.token)
    scene = Scene(tmp_path, upstream, fake_github)
    git(upstream.path, "branch", "release-1")  # cut before the change lands on main
    ws = Workspace(scene.root, {"proj": upstream})
    _targets(ws, "sm120", "main", "release-1")
    upstream.commit("core: f3 returns 30 (#30)", {"pkg/core.py": upstream.read("pkg/core.py")
                                                  .replace("return 3\n", "return 30\n")})
    sync = ws.run("sync", "--json").json
    assert isinstance(sync, dict)
    results = {r["patchset"]: r["result"] for r in sync["results"]}
    assert results == {"proj/sm120@main": "upstreamed", "proj/sm120@release-1": "unchanged"}
    status = ws.run("status", "--no-fetch", "--json").json
    assert isinstance(status, dict)
    rows = {r["patchset"]: r["upstream_status"] for r in status["patchsets"]}
    assert rows == {"proj/sm120@main": "Upstreamed", "proj/sm120@release-1": "Pending"}
    code, opened = scene.run(TARGET)
    assert code == 0, opened
    by_target = {r["patchset"]: r["result"] for r in opened}
    assert by_target["proj/sm120@main"] == "upstreamed"
    assert [p["base"]["ref"] for p in scene.prs()] == ["release-1"]


def test_continue_and_abort_of_the_plain_name_reach_every_target(lines: Workspace,
                                                                 upstream: Repo) -> None:
    upstream.commit("core: f3 differently", {"pkg/core.py": F3_PATCH.replace("33", "34")})
    conflict = lines.run("sync", "--json")
    assert conflict.code == 1, conflict.err
    aborted = lines.run("sync", "--abort", "proj/x")
    assert aborted.code == 0, aborted.err
    assert "proj/x@main: aborted" in aborted.out + aborted.err
