"""`contrib sync` conflicts: bisection to the breaking commit, worktree, --continue, --abort."""

from __future__ import annotations

import json
import math
from pathlib import Path

from testing.gitutil import Repo, git
from testing.histories import Change, fast_import, filler
from testing.synchelp import (
    CORE,
    F3_PATCH,
    add_patchset,
    applied_file,
    commit_workspace,
    meta,
    series,
    sync_json,
    version_dir,
)
from testing.workspace import SAMPLE, Workspace

BROKEN = CORE.replace("    return 3\n", "    return 3 + 0\n")


def _conflict_ahead(upstream: Repo, total: int, at: int) -> list[str]:
    """``total`` upstream commits; commit number ``at`` (1-based) rewrites f3's return."""
    changes = filler(at - 1)
    changes.append(Change("core: f3 returns 3 + 0 (#4242)", {"pkg/core.py": BROKEN},
                          who="Breaking Dev"))
    changes += [Change(f"core: f15 v{i}", {"pkg/core.py": BROKEN.replace(
        "    return 15\n", f"    return 15  # v{i}\n")}) if i % 10 == 0 else c
        for i, c in enumerate(filler(total - at, start=at), 1)]
    return fast_import(upstream, changes)


def test_conflict_150_ahead_of_400_is_found_by_bisection(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    base = add_patchset(workspace, upstream, tmp_path, "f3",
                        [("core: make f3 return 33", {"pkg/core.py": F3_PATCH})])
    shas = _conflict_ahead(upstream, 400, 150)
    code, res = sync_json(workspace)
    assert code == 1 and res["result"] == "conflict"
    c = res["conflict"]
    assert c["commit"]["sha"] == shas[149]
    assert c["commit"]["subject"] == "core: f3 returns 3 + 0 (#4242)"
    assert c["commit"]["pr"] == 4242
    assert c["commit"]["author"] == "Breaking Dev <breaking.dev@example.com>"
    assert c["commit"]["date"].startswith("2023-")
    assert res["probes"] <= 11 and res["probes"] <= math.ceil(math.log2(400)) + 2
    assert c["files"] == ["pkg/core.py"] and c["patch"] == "0001-core-make-f3-return-33.patch"
    assert c["hunks"] == ["pkg/core.py @@ -11,7 +11,7 @@ def f2(): (in f3)"]
    worktree = Path(c["worktree"])
    text = (worktree / "pkg/core.py").read_text()
    assert "<<<<<<<" in text and "return 33" in text and "return 3 + 0" in text
    # The sides are named: the upstream commit, and the patch carried onto it.
    assert f"<<<<<<< upstream {shas[149][:12]}\n" in text
    assert ">>>>>>> 0001-core-make-f3-return-33.patch\n" in text
    assert "ours" not in text and "theirs" not in text
    assert "return 15  # v" not in text, "the worktree sits at the breaking commit"
    assert "+    return 3 + 0" in Path(c["breaking_diff"]).read_text()
    doc = meta(workspace, "f3")
    assert doc["current"] == base and doc["sync"]["result"] == "conflict"
    assert doc["sync"]["details"]["conflict"]["commit"]["sha"] == shas[149]
    state = json.loads((workspace.root / ".contrib" / "sync-state.json").read_text())
    assert state["state_version"] == 1 and list(state["pending"]) == ["proj/f3"]
    human = workspace.run("sync")  # still pending: reported, nothing touched
    assert human.code == 1 and "sync --continue proj/f3" in human.out


def test_human_report_names_the_breaking_commit(workspace: Workspace, upstream: Repo,
                                                tmp_path: Path) -> None:
    add_patchset(workspace, upstream, tmp_path, "f3",
                 [("core: make f3 return 33", {"pkg/core.py": F3_PATCH})])
    shas = _conflict_ahead(upstream, 40, 12)
    result = workspace.run("sync")
    assert result.code == 1
    assert f"first breaks at upstream commit {shas[11][:12]}" in result.out
    assert "core: f3 returns 3 + 0 (#4242)" in result.out and "PR #4242" in result.out
    assert "Breaking Dev" in result.out and "pkg/core.py" in result.out


def test_continue_refuses_markers_then_records_and_carries_on(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    add_patchset(workspace, upstream, tmp_path, "f3",
                 [("core: make f3 return 33\n\nWhy: 33.", {"pkg/core.py": F3_PATCH})])
    shas = _conflict_ahead(upstream, 60, 20)
    tip = upstream.head()
    code, res = sync_json(workspace)
    assert code == 1
    worktree = Path(res["conflict"]["worktree"])
    refused = workspace.run("sync", "--continue", "proj/f3")
    assert refused.code == 1 and "unresolved conflicts in pkg/core.py" in refused.err
    resolved = BROKEN.replace("    return 3 + 0\n", "    return 33 + 0\n")
    (worktree / "pkg/core.py").write_text(resolved)
    code, res = sync_json(workspace, "--continue", "proj/f3")
    assert code == 0, res
    assert res["result"] == "rebased" and res["version"] == tip
    breaking = shas[19]
    assert res["notes"][0] == f"resolved 0001-core-make-f3-return-33.patch at {breaking[:12]}"
    doc = meta(workspace, "f3")
    assert doc["current"] == tip and doc["sync"]["result"] == "rebased"
    # [[history]]: made by new, resolved by hand at the breaking commit, carried by sync
    assert [(h["how"], h["version"]) for h in doc["history"]] == [
        ("new", doc["history"][0]["version"]), ("resolved", breaking), ("sync", tip)]
    assert series(workspace, "f3", breaking) == ["0001-core-make-f3-return-33.patch"]
    at_break = (version_dir(workspace, "f3", breaking) / series(workspace, "f3", breaking)[0])
    text = at_break.read_text()
    assert "From: Patch Author <patch.author@example.com>" in text and "Why: 33." in text
    assert "-    return 3 + 0\n+    return 33 + 0" in text
    final = applied_file(upstream, workspace, "f3", tip, "pkg/core.py", tmp_path)
    assert "    return 33 + 0\n" in final and "return 15  # v" in final
    assert not worktree.exists()
    assert not (workspace.root / ".contrib" / "sync-state.json").exists()


def test_abort_leaves_everything_as_before(workspace: Workspace, upstream: Repo,
                                           tmp_path: Path) -> None:
    add_patchset(workspace, upstream, tmp_path, "f3",
                 [("core: make f3 return 33", {"pkg/core.py": F3_PATCH})])
    meta_path = workspace.root / "patchsets/proj/f3/patchset.toml"
    before = meta_path.read_text()
    listing = sorted(p.name for p in meta_path.parent.iterdir())
    _conflict_ahead(upstream, 30, 10)
    code, res = sync_json(workspace)
    assert code == 1
    worktree = Path(res["conflict"]["worktree"])
    assert worktree.is_dir()
    result = workspace.run("sync", "--abort", "proj/f3", "--json")
    assert result.code == 0 and result.json == {"aborted": ["proj/f3"]}
    assert meta_path.read_text() == before
    assert sorted(p.name for p in meta_path.parent.iterdir()) == listing
    assert not worktree.exists() and not (workspace.root / ".contrib/sync-state.json").exists()
    mirror = next((Path(str(workspace.root)).parent / "home").glob("**/upstreams/proj-*.git"),
                  None)
    if mirror is not None:
        assert git(mirror, "worktree", "list").count("\n") == 0
    again = workspace.run("sync", "--abort")
    assert again.code == 2 and "no conflict is pending" in again.err


def test_three_patch_series_where_patch_two_conflicts(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    p1 = CORE.replace("    return 1\n", "    return 11\n")
    p2 = p1.replace("    return 3\n", "    return 33\n")
    p3 = p2.replace("    return 7\n", "    return 77\n")
    add_patchset(workspace, upstream, tmp_path, "three",
                 [("core: f1", {"pkg/core.py": p1}), ("core: f3", {"pkg/core.py": p2}),
                  ("core: f7", {"pkg/core.py": p3})])
    shas = _conflict_ahead(upstream, 50, 25)
    tip = upstream.head()
    code, res = sync_json(workspace)
    assert code == 1 and res["conflict"]["patch"] == "0002-core-f3.patch"
    assert res["conflict"]["commit"]["sha"] == shas[24]
    worktree = Path(res["conflict"]["worktree"])
    text = (worktree / "pkg/core.py").read_text()
    assert "    return 11\n" in text, "patch 1 is carried in the worktree"
    assert "<<<<<<<" in text and "    return 77\n" not in text
    (worktree / "pkg/core.py").write_text(BROKEN.replace("    return 1\n", "    return 11\n")
                                          .replace("    return 3 + 0\n", "    return 33\n"))
    code, res = sync_json(workspace, "--continue")
    assert code == 0, res
    assert res["result"] == "rebased" and res["version"] == tip
    assert series(workspace, "three", tip) == ["0001-core-f1.patch", "0002-core-f3.patch",
                                               "0003-core-f7.patch"]
    final = applied_file(upstream, workspace, "three", tip, "pkg/core.py", tmp_path)
    for line in ("    return 11\n", "    return 33\n", "    return 77\n", "return 15  # v"):
        assert line in final


def test_conflict_after_a_rewrite_is_resolved_at_the_target(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    from testing.histories import rewrite_history

    add_patchset(workspace, upstream, tmp_path, "f3",
                 [("core: make f3 return 33", {"pkg/core.py": F3_PATCH})])
    assert workspace.run("sync", "--no-fetch").code == 0
    tip = rewrite_history(upstream, dict(SAMPLE, **{"pkg/core.py": BROKEN}), "squash (#7)")
    code, res = sync_json(workspace)
    assert code == 1 and res["conflict"]["commit"]["sha"] == tip, "no path: the target itself"
    assert "not an ancestor" in " ".join(res["notes"])
    worktree = Path(res["conflict"]["worktree"])
    (worktree / "pkg/core.py").write_text(BROKEN.replace("return 3 + 0", "return 33 + 0"))
    code, res = sync_json(workspace, "--continue", "proj")
    assert code == 0 and res["result"] == "rebased" and res["version"] == tip
    assert meta(workspace, "f3")["current"] == tip
    assert "return 33 + 0" in applied_file(upstream, workspace, "f3", tip, "pkg/core.py",
                                           tmp_path)


def test_one_conflict_does_not_stop_the_others(workspace: Workspace, upstream: Repo,
                                               tmp_path: Path) -> None:
    add_patchset(workspace, upstream, tmp_path, "f3",
                 [("core: make f3 return 33", {"pkg/core.py": F3_PATCH})])
    add_patchset(workspace, upstream, tmp_path, "f9",
                 [("core: make f9 return 99", {"pkg/core.py": CORE.replace(
                     "    return 9\n", "    return 99\n")})])
    commit_workspace(workspace)
    _conflict_ahead(upstream, 20, 5)
    result = workspace.run("sync", "--json", "--commit")
    assert result.code == 1
    by_name = {r["patchset"]: r["result"] for r in result.json["results"]}  # type: ignore[index]
    assert by_name == {"proj/f3": "conflict", "proj/f9": "rebased"}
    assert result.json["commit"]  # type: ignore[index]
    subject = git(workspace.root, "log", "-1", "--format=%s")
    assert subject.startswith("proj/f9: rebase onto"), "only the carried patchset is committed"


def test_continue_into_a_second_conflict_then_abort_keeps_the_resolution(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    add_patchset(workspace, upstream, tmp_path, "f3",
                 [("core: make f3 return 33", {"pkg/core.py": F3_PATCH})])
    again = BROKEN.replace("return 3 + 0", "return 3 + 1")
    shas = fast_import(upstream, [*filler(9), Change("f3: + 0", {"pkg/core.py": BROKEN}),
                                  *filler(19, start=9), Change("f3: + 1 (#31)",
                                                               {"pkg/core.py": again}),
                                  *filler(5, start=28)])
    code, res = sync_json(workspace)
    assert code == 1 and res["conflict"]["commit"]["sha"] == shas[9]
    first = shas[9]
    (Path(res["conflict"]["worktree"]) / "pkg/core.py").write_text(
        BROKEN.replace("return 3 + 0", "return 33 + 0"))
    code, res = sync_json(workspace, "--continue")
    assert code == 1 and res["result"] == "conflict"
    assert res["conflict"]["commit"]["sha"] == shas[29] and res["conflict"]["commit"]["pr"] == 31
    assert res["notes"][:2] == [f"resolved 0001-core-make-f3-return-33.patch at {first[:12]}",
                                f"recorded the resolved version at {first[:12]}"]
    assert meta(workspace, "f3")["current"] == first
    assert workspace.run("sync", "--abort").code == 0
    doc = meta(workspace, "f3")
    assert doc["current"] == first and doc["sync"]["result"] == "rebased"
    assert series(workspace, "f3", first) == ["0001-core-make-f3-return-33.patch"]
