"""`contrib edit` / `contrib refresh`: change a patchset in a git branch and hand it back.

Each story opens a two-patch patchset as branch contrib/two, changes it the
way a user would (amend, add a commit, rebase, merge, reset), refreshes, and
checks what was written -- or that nothing was.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contrib.workspace.model import Workspace as Ws
from testing.crash import snapshot
from testing.gitutil import Repo, git
from testing.recordutil import PASSING, run_of, write_bound
from testing.synchelp import (
    CORE,
    F3_F5,
    F3_PATCH,
    USER,
    add_patchset,
    commit_in,
    meta,
    series,
    version_dir,
)
from testing.workspace import Workspace


@pytest.fixture
def two(workspace: Workspace, upstream: Repo, tmp_path: Path) -> str:
    """Patchset proj/two: f3 -> 33, then a docs file; returns its base."""
    return add_patchset(workspace, upstream, tmp_path, "two", [
        ("core: make f3 return 33", {"pkg/core.py": F3_PATCH}),
        ("docs: describe f3", {"docs/f3.md": "f3 returns 33\n"})])


def edit_json(ws: Workspace, *args: str) -> dict[str, Any]:
    result = ws.run("edit", "--json", "proj/two", *args)
    assert result.code == 0, (result.out, result.err)
    doc = result.json
    assert isinstance(doc, dict)
    return doc


def refresh(ws: Workspace, *args: str) -> tuple[int, dict[str, Any]]:
    result = ws.run("refresh", "--json", "proj/two", *args)
    doc = result.json
    assert isinstance(doc, dict), result.out
    return result.code, doc


def test_edit_amend_add_refresh_replaces_the_version(workspace: Workspace, two: str) -> None:
    folder = version_dir(workspace, "two", two)
    old_patches = {p.name: p.read_bytes() for p in folder.glob("*.patch")}
    write_bound(Ws(workspace.root).patchset("proj/two").version(two), run_of(PASSING))
    doc = edit_json(workspace)
    tree = Path(doc["path"])
    assert tree == workspace.root / ".contrib" / "edit" / "proj--two"
    assert [c["subject"] for c in doc["commits"]] == ["core: make f3 return 33",
                                                      "docs: describe f3"]
    # the cache is shared by every workspace: the worktree's branch is this workspace's own
    assert doc["branch"].startswith("contrib/") and doc["branch"].endswith("/two")
    assert git(tree, "rev-parse", "--abbrev-ref", "HEAD") == doc["branch"]
    assert git(tree, "log", "-1", "--format=%an", "HEAD~1") == "Patch Author"
    # The user amends the docs commit and adds a third one.
    commit_in(tree, "docs: describe f3", {"docs/f3.md": "f3 returns 33 now\n"}, "--amend")
    commit_in(tree, "core: make f5 return 55", {"pkg/core.py": F3_F5})

    code, out = refresh(workspace)
    assert code == 0, out
    assert out["result"] == "replaced" and out["version"] == two
    assert out["patches"] == ["0001-core-make-f3-return-33.patch",
                              "0002-docs-describe-f3.patch", "0003-core-make-f5-return-55.patch"]
    assert series(workspace, "two", two) == out["patches"]
    assert b"+f3 returns 33 now" in (folder / out["patches"][1]).read_bytes()
    assert b"From: Edit User" in (folder / out["patches"][2]).read_bytes()
    # canonical form, as `new` writes it
    assert (folder / out["patches"][2]).read_bytes().startswith(b"From " + b"0" * 40)
    # the old patches and the validation record that described them are kept aside
    assert not (folder / "validation.json").exists() and out["validation_set_aside"]
    kept = Path(out["superseded"])
    assert kept.is_relative_to(workspace.root / ".contrib" / "superseded")
    assert {p.name: p.read_bytes() for p in kept.glob("*.patch")} == old_patches
    assert (kept / "validation.json").is_file()
    assert "docs: describe f3" in out["range_diff"] and "3:" in out["range_diff"]
    assert meta(workspace, "two")["history"][-1]["how"] == "refresh"
    # a second refresh finds nothing new
    before = snapshot(workspace.root)
    code, again = refresh(workspace)
    assert (code, again["result"]) == (0, "unchanged")
    assert snapshot(workspace.root) == before


def test_refresh_with_no_change_writes_nothing(workspace: Workspace, two: str) -> None:
    edit_json(workspace)
    before = snapshot(workspace.root)
    result = workspace.run("refresh", "proj/two")
    assert result.code == 0, result.err
    assert "unchanged" in result.out
    assert snapshot(workspace.root) == before


def test_rebase_onto_newer_upstream_records_a_new_version(workspace: Workspace, upstream: Repo,
                                                          two: str) -> None:
    tree = Path(edit_json(workspace)["path"])
    newer = upstream.commit("upstream: more docs", {"docs/more.md": "more\n"})
    git(tree, "fetch", "-q", "origin")  # the worktree shares the cache's remote
    git(tree, "rebase", "-q", "origin/main", env=USER)
    code, out = refresh(workspace)
    assert code == 0, out
    assert (out["result"], out["version"], out["from"]) == ("rebased", newer, two)
    assert meta(workspace, "two")["current"] == newer
    assert series(workspace, "two", newer) == series(workspace, "two", two)
    assert version_dir(workspace, "two", two).is_dir()  # the old version stays
    assert out["superseded"] is None


@pytest.mark.parametrize("damage", ["merge", "empty", "lost-base"])
def test_bad_branches_are_refused_with_nothing_changed(workspace: Workspace, two: str,
                                                       damage: str) -> None:
    opened = edit_json(workspace)
    tree, branch = Path(opened["path"]), opened["branch"]
    if damage == "merge":
        git(tree, "checkout", "-q", "-b", "side", "HEAD~1")
        commit_in(tree, "side work", {"side.txt": "x\n"})
        git(tree, "checkout", "-q", branch)
        git(tree, "merge", "-q", "--no-ff", "-m", "merge side", "side", env=USER)
    elif damage == "empty":
        git(tree, "reset", "-q", "--hard", two)
    else:
        git(tree, "checkout", "-q", "--orphan", "tmp")
        git(tree, "commit", "-q", "-m", "everything from scratch", env=USER)
        git(tree, "branch", "-q", "-f", branch, "tmp")
        git(tree, "checkout", "-q", branch)
    before = snapshot(workspace.root)
    state = (workspace.root / ".contrib" / "edit-state.json").read_text()
    result = workspace.run("refresh", "proj/two")
    assert result.code == 2, (result.out, result.err)
    reason = {"merge": "merge commit", "empty": "no commits",
              "lost-base": "no longer contains the recorded base"}[damage]
    assert reason in result.err and result.err.count("\n") == 1
    assert snapshot(workspace.root) == before
    assert (workspace.root / ".contrib" / "edit-state.json").read_text() == state


def test_refresh_refuses_uncommitted_changes(workspace: Workspace, two: str) -> None:
    tree = Path(edit_json(workspace)["path"])
    (tree / "forgotten.py").write_text("x = 1\n")
    code, doc = refresh(workspace)
    assert (code, doc["result"], doc["untracked"]) == (0, "unchanged", ["forgotten.py"])
    human = workspace.run("refresh", "proj/two")
    assert "not taken (never committed): forgotten.py" in human.err
    (tree / "pkg" / "core.py").write_text(CORE)
    result = workspace.run("refresh", "proj/two")
    assert result.code == 2 and "uncommitted changes in pkg/core.py" in result.err


def test_edit_into_a_clone_and_refresh_from_it(workspace: Workspace, upstream: Repo,
                                               two: str, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(upstream.path), str(clone))
    doc = edit_json(workspace, "--repo", str(clone))
    assert doc["mode"] == "repo" and doc["path"] == str(clone)
    assert git(clone, "rev-parse", "contrib/two") == doc["tip"]
    git(clone, "checkout", "-q", "contrib/two")
    commit_in(clone, "docs: describe f3", {"docs/f3.md": "f3 returns 33 (clone)\n"}, "--amend")
    git(clone, "checkout", "-q", "main")
    code, out = refresh(workspace, "--repo", str(clone))
    assert (code, out["result"]) == (0, "replaced"), out
    assert b"(clone)" in (version_dir(workspace, "two", two) / out["patches"][1]).read_bytes()
    # editing again moves contrib's own branch without --force
    assert edit_json(workspace, "--repo", str(clone))["changed"] is True


def test_edit_refuses_a_foreign_branch_in_a_clone(workspace: Workspace, upstream: Repo,
                                                 two: str, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(upstream.path), str(clone))
    git(clone, "checkout", "-q", "-b", "contrib/two")
    commit_in(clone, "someone else's work", {"theirs.txt": "mine\n"})
    theirs = git(clone, "rev-parse", "HEAD")
    git(clone, "checkout", "-q", "main")
    result = workspace.run("edit", "proj/two", "--repo", str(clone))
    assert result.code == 2 and "commits contrib did not make" in result.err
    assert git(clone, "rev-parse", "contrib/two") == theirs
    assert not (workspace.root / ".contrib" / "edit-state.json").exists()
    forced = workspace.run("edit", "proj/two", "--repo", str(clone), "--force")
    assert forced.code == 0, forced.err
    assert git(clone, "rev-parse", "contrib/two") != theirs


def test_edit_twice_is_idempotent_and_guards_unrefreshed_work(workspace: Workspace,
                                                             two: str) -> None:
    first = edit_json(workspace)
    again = edit_json(workspace)
    assert (again["changed"], again["tip"]) == (False, first["tip"])
    tree = Path(first["path"])
    commit_in(tree, "wip", {"wip.txt": "x\n"})
    refused = workspace.run("edit", "proj/two")
    assert refused.code == 2 and "contrib refresh proj/two" in refused.err
    assert (tree / "wip.txt").is_file()


def test_open_edits_tells_doctor_what_is_not_refreshed(workspace: Workspace, two: str) -> None:
    from contrib.carry.edits import EditState, open_edits
    from contrib.workspace.model import Workspace as Ws

    tree = Path(edit_json(workspace)["path"])
    [(edit, state)] = open_edits(Ws(workspace.root))
    assert (edit.patchset, state) == ("proj/two", EditState.REFRESHED)
    commit_in(tree, "wip", {"wip.txt": "x\n"})
    [(_, state)] = open_edits(Ws(workspace.root))
    assert state == EditState.CHANGED



def test_doctor_names_an_edit_not_refreshed(workspace: Workspace, two: str) -> None:
    tree = Path(edit_json(workspace)["path"])
    checks = {c["name"]: c for c in workspace.run("doctor", "--json").json["checks"]}  # type: ignore[index]
    assert checks["edits"]["status"] == "ok"
    commit_in(tree, "wip", {"wip.txt": "x\n"})
    result = workspace.run("doctor", "--json")
    checks = {c["name"]: c for c in result.json["checks"]}  # type: ignore[index]
    assert result.code == 1
    assert checks["edit proj/two"]["status"] == "FAIL"
    assert "contrib refresh proj/two" in checks["edit proj/two"]["fix"]

def test_refresh_refuses_a_branch_left_behind_by_a_sync(workspace: Workspace, upstream: Repo,
                                                        two: str) -> None:
    opened = edit_json(workspace)
    tree = Path(opened["path"])
    commit_in(tree, "wip", {"wip.txt": "x\n"})
    newer = upstream.commit("upstream: more", {"docs/more.md": "more\n"})
    assert workspace.run("sync", "proj/two").code == 0
    assert meta(workspace, "two")["current"] == newer
    before = snapshot(workspace.root)
    result = workspace.run("refresh", "proj/two")
    assert result.code == 2 and f"moved to {newer[:12]}" in result.err
    assert snapshot(workspace.root) == before
    git(tree, "rebase", "-q", "--onto", newer, two, opened["branch"], env=USER)
    code, out = refresh(workspace)
    assert (code, out["result"], out["version"]) == (0, "replaced", newer)
    assert out["patches"][-1] == "0003-wip.patch"


def test_edit_in_a_chosen_folder(workspace: Workspace, two: str, tmp_path: Path) -> None:
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "mine.txt").write_text("keep\n")
    refused = workspace.run("edit", "proj/two", "--path", str(busy))
    assert refused.code == 2 and "not empty" in refused.err
    assert (busy / "mine.txt").read_text() == "keep\n"
    place = tmp_path / "edit-here"
    doc = edit_json(workspace, "--path", str(place))
    assert Path(doc["path"]) == place.resolve()
    commit_in(place, "docs: describe f3", {"docs/f3.md": "moved\n"}, "--amend")
    code, out = refresh(workspace, "--path", str(place))
    assert (code, out["result"]) == (0, "replaced")
    # moving the edit to the default folder releases the first worktree (it is clean)
    moved = edit_json(workspace)
    assert Path(moved["path"]) != place.resolve() and not place.exists()


@pytest.mark.parametrize("damage", ["not json", "version 9", "unknown key", "bad sha",
                                    "missing key", "other patchset"])
def test_a_hand_edited_edit_state_is_one_clear_line(workspace: Workspace, two: str,
                                                    damage: str) -> None:
    edit_json(workspace)
    path = workspace.root / ".contrib" / "edit-state.json"
    doc = json.loads(path.read_text())
    entry = doc["edits"]["proj/two"]
    if damage == "version 9":
        doc["state_version"] = 9
    elif damage == "unknown key":
        entry["colour"] = "red"
    elif damage == "bad sha":
        entry["commits"] = ["HEAD"]
    elif damage == "missing key":
        del entry["base"]
    elif damage == "other patchset":
        doc["edits"]["proj/other"] = entry
    path.write_text("{not json" if damage == "not json" else json.dumps(doc))
    for command in ("edit", "refresh"):
        result = workspace.run(command, "proj/two")
        assert result.code == 2, (damage, result.err)
        assert str(path) in result.err and result.err.count("\n") == 1


def test_edit_never_follows_a_symlinked_edit_folder(workspace: Workspace, two: str,
                                                    tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (workspace.root / ".contrib").mkdir(exist_ok=True)
    (workspace.root / ".contrib" / "edit").symlink_to(elsewhere)
    result = workspace.run("edit", "proj/two")
    assert result.code == 2, result.err
    assert list(elsewhere.iterdir()) == []
