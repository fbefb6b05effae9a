"""`contrib sync` finds a patch upstream landed in its own form, even after later commits
changed it; and never calls a real conflict upstreamed."""

from __future__ import annotations

from pathlib import Path

import pytest

from contrib.carry.landed import meaningful, measure, same_subject
from contrib.git.repo import Git
from testing.gitutil import Repo
from testing.histories import Change, fast_import, filler
from testing.synchelp import (
    AFTER_F3,
    CORE,
    HELPER,
    OURS,
    REVIEWED,
    add_patchset,
    meta,
    series,
    sync_json,
)
from testing.workspace import Workspace

# A later upstream commit rewrites the lines right next to it.
CHANGED = REVIEWED.replace("def f3():\n    return 3\n", "def f3():\n    return 3 * 1  # three\n")


def _landed_then_changed(upstream: Repo, subject: str) -> list[str]:
    return fast_import(upstream, [*filler(6), Change(subject, {"pkg/core.py": REVIEWED},
                                                     who="Core Dev"),
                                  *filler(5, start=6),
                                  Change("core: spell out f3", {"pkg/core.py": CHANGED}),
                                  *filler(3, start=11)])


@pytest.mark.parametrize("subject", ["core: add scaled() (#4321)",
                                     "refactor: numeric helpers (#4321)"])
def test_squashed_with_review_then_changed_is_upstreamed(
        workspace: Workspace, upstream: Repo, tmp_path: Path, subject: str) -> None:
    add_patchset(workspace, upstream, tmp_path, "scaled",
                 [("core: add scaled()", {"pkg/core.py": OURS}),
                  ("docs: mention scaled", {"README.md": "upstream project\nsee scaled()\n"})])
    shas = _landed_then_changed(upstream, subject)
    code, res = sync_json(workspace)
    assert code == 0, res
    assert res["result"] == "partially-upstreamed"
    [up] = res["upstreamed"]
    assert up["how"] == "landed" and up["commit"]["sha"] == shas[6] == up["landed_by"]["sha"]
    assert up["commit"]["pr"] == 4321 and up["share"] == pytest.approx(7 / 8, abs=0.001)
    # The subject corroborates or not; the lines decide either way.
    assert up["subject_match"] is subject.startswith("core: add scaled()")
    assert [c["sha"] for c in up["changed_by"]] == [shas[12]]
    assert series(workspace, "scaled", res["version"]) == ["0001-docs-mention-scaled.patch"]
    record = meta(workspace, "scaled")["sync"]["details"]["upstreamed"][0]
    assert record["sha"] == shas[6] and record["changed_by"] == [shas[12]]
    assert record["share"] == pytest.approx(0.875)


def test_landed_share_tunes_the_threshold(workspace: Workspace, upstream: Repo,
                                          tmp_path: Path) -> None:
    add_patchset(workspace, upstream, tmp_path, "scaled",
                 [("core: add scaled()", {"pkg/core.py": OURS})])
    toml = workspace.root / "patchsets" / "proj" / "scaled" / "patchset.toml"
    toml.write_text(toml.read_text() + "\n[sync_rules]\nlanded_share = 0.95\n")
    _landed_then_changed(upstream, "core: add scaled() (#4321)")
    code, res = sync_json(workspace)
    assert not res["upstreamed"] and res["result"] in ("rebased", "conflict"), res
    assert "landed_share = 0.95" in toml.read_text(), "sync keeps the user's setting"


def test_lines_written_independently_in_two_commits_stay_a_conflict(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    add_patchset(workspace, upstream, tmp_path, "scaled",
                 [("core: add scaled()", {"pkg/core.py": OURS})])
    first, second = HELPER.split("    out = []\n")
    half = CORE.replace(AFTER_F3, first + "    return list(values)\n\n\n" + AFTER_F3)
    whole = CORE.replace(AFTER_F3, first + "    out = []\n" + second + AFTER_F3)
    shas = fast_import(upstream, [Change("core: validate factors", {"pkg/core.py": half}),
                                  *filler(4),
                                  Change("core: scale for real", {"pkg/core.py": whole.replace(
                                      "must not be zero", "is zero")})])
    code, res = sync_json(workspace)
    assert code == 1 and res["result"] == "conflict", res
    evidence = res["conflict"]["evidence"]
    assert evidence["landed_by"] is None
    assert {b["sha"] for b in evidence["by"]} == {shas[0], shas[5]}
    assert any("of its added lines are upstream, 50% from" in n for n in res["notes"])


def test_an_unrelated_conflict_stays_a_conflict(workspace: Workspace, upstream: Repo,
                                                tmp_path: Path) -> None:
    add_patchset(workspace, upstream, tmp_path, "scaled",
                 [("core: add scaled()", {"pkg/core.py": OURS})])
    theirs = CORE.replace(AFTER_F3, "def total(values):\n    return sum(values)\n\n\n" + AFTER_F3)
    fast_import(upstream, [Change("core: add total", {"pkg/core.py": theirs}), *filler(3)])
    code, res = sync_json(workspace)
    assert code == 1 and res["result"] == "conflict", res
    assert res["conflict"]["evidence"]["share"] == 0
    assert not res["conflict"]["evidence"]["by"]


def test_a_patch_that_only_removes_lines(workspace: Workspace, upstream: Repo,
                                         tmp_path: Path) -> None:
    dropped = CORE.replace("def f5():\n    return 5\n\n\n", "")
    base = add_patchset(workspace, upstream, tmp_path, "drop-f5",
                        [("core: drop f5", {"pkg/core.py": dropped})])
    theirs = dropped.replace("def f6():\n    return 6\n", "def f6():\n    return 6 + 0\n")
    shas = fast_import(upstream, [*filler(3), Change("core: drop f5 and tidy f6 (#9)",
                                                     {"pkg/core.py": theirs}),
                                  Change("core: f4 gets a comment", {"pkg/core.py": theirs.replace(
                                      "def f4():\n", "def f4():  # four\n")}), *filler(2, start=3)])
    code, res = sync_json(workspace)
    assert code == 0 and res["result"] == "upstreamed", res
    assert res["upstreamed"][0]["commit"]["sha"] == shas[3]
    git = Git(upstream.path)
    patch = (workspace.root / "patchsets" / "proj" / "drop-f5" / base).glob("*.patch")
    evidence = measure(git, next(patch).read_text(), "p", base, shas[-1])
    assert evidence.lines == 0 and evidence.gone == evidence.removed == 2
    assert evidence.landed_by == shas[3]


def test_same_subject() -> None:
    assert same_subject("[PATCH v2] Add ModelOpt MXFP8 support",
                        "[Feature] Add ModelOpt MXFP8 support (#32538)")
    assert same_subject("fix(comm): gate sm120", "Gate sm120 in comm (#7)")
    assert not same_subject("core: add scaled()", "refactor: numeric helpers (#4321)")
    assert not same_subject("", "anything")


def test_meaningful_lines() -> None:
    assert meaningful("    })\n") == "" and meaningful("   ") == "" and meaningful("else:") == ""
    assert meaningful("  out  =  []") == "out = []"


def test_continue_leaves_out_a_later_patch_upstream_landed(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    """Patch 1 really conflicts; patch 2 landed (reviewed, then changed) before the commit
    that breaks patch 1: the conflict names patch 2 as landed, and --continue carries
    on without handing it over as a second conflict."""
    theirs = CORE.replace(AFTER_F3, HELPER + AFTER_F3)
    ours = theirs.replace("    return 3\n", "    return 33\n")
    add_patchset(workspace, upstream, tmp_path, "two",
                 [("core: make f3 return 33", {"pkg/core.py": CORE.replace(
                     "    return 3\n", "    return 33\n")}),
                  ("core: add scaled()", {"pkg/core.py": ours})])
    shas = fast_import(upstream, [*filler(3), Change("core: add scaled() (#77)",
                                                     {"pkg/core.py": REVIEWED}),
                                  *filler(3, start=3),
                                  Change("core: spell out f3", {"pkg/core.py": CHANGED}),
                                  *filler(2, start=6)])
    code, res = sync_json(workspace)
    assert code == 1 and res["result"] == "conflict", res
    assert res["conflict"]["commit"]["sha"] == shas[7]
    assert any(n.startswith("0002-core-add-scaled.patch: landed upstream in "
                            f"{shas[3][:10]}") for n in res["notes"]), res["notes"]
    worktree = Path(res["conflict"]["worktree"])
    (worktree / "pkg/core.py").write_text(CHANGED.replace("return 3 * 1", "return 33 * 1"))
    code, res = sync_json(workspace, "--continue")
    assert code == 0 and res["result"] == "partially-upstreamed", res
    [up] = res["upstreamed"]
    assert up["patch"] == "0002-core-add-scaled.patch" and up["how"] == "landed"
    assert up["commit"]["sha"] == shas[3] and up["commit"]["pr"] == 77
    assert [c["sha"] for c in up["changed_by"]] == [shas[7]]
    assert series(workspace, "two", res["version"]) == ["0001-core-make-f3-return-33.patch"]


def test_landed_in_a_file_upstream_renamed(workspace: Workspace, upstream: Repo,
                                          tmp_path: Path) -> None:
    """Upstream landed the patch, then moved the file under another name: its lines are
    found there, and the patch is upstream by the landing commit."""
    add_patchset(workspace, upstream, tmp_path, "scaled",
                 [("core: add scaled()", {"pkg/core.py": OURS}),
                  ("docs: mention scaled", {"README.md": "upstream project\nsee scaled()\n"})])
    shas = fast_import(upstream, [*filler(3), Change("core: add scaled() (#51)",
                                                     {"pkg/core.py": REVIEWED}),
                                  Change("core: rename to numeric", {"pkg/core.py": None,
                                                                     "pkg/numeric.py": CHANGED}),
                                  *filler(2, start=3)])
    code, res = sync_json(workspace)
    assert code == 0 and res["result"] == "partially-upstreamed", res
    [up] = res["upstreamed"]
    assert up["how"] == "landed" and up["commit"]["sha"] == shas[3], up
    assert series(workspace, "scaled", res["version"]) == ["0001-docs-mention-scaled.patch"]
