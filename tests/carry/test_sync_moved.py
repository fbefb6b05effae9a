"""A workspace moved with ``mv`` while conflicts wait: their worktrees keep working.

The conflict worktrees live in the workspace (``.contrib/conflicts/``) but belong to
the upstream cache, which still names their old place after a move.  Removing one
worktree prunes the cache's list of worktrees: without a repair first, the others
are forgotten and the next ``--continue`` makes them again, the user's resolution
deleted.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from testing.gitutil import Repo, git
from testing.synchelp import CORE, F3_PATCH, add_patchset, meta, sync_json
from testing.workspace import Workspace

BROKEN = CORE.replace("    return 3\n", "    return 3 + 0\n")
F3_34 = CORE.replace("    return 3\n", "    return 34\n")


def _two_conflicts(workspace: Workspace, upstream: Repo, tmp_path: Path) -> dict[str, Path]:
    """proj/a and proj/b both conflict at one upstream commit; their worktrees."""
    add_patchset(workspace, upstream, tmp_path, "a", [("core: f3 = 33", {"pkg/core.py": F3_PATCH})])
    add_patchset(workspace, upstream, tmp_path, "b", [("core: f3 = 34", {"pkg/core.py": F3_34})])
    upstream.commit("core: f3 returns 3 + 0", {"pkg/core.py": BROKEN})
    code, res = sync_json(workspace)
    assert code == 1
    return {r["patchset"]: Path(r["conflict"]["worktree"]) for r in res["all"]}


def _moved(workspace: Workspace, tmp_path: Path) -> Workspace:
    target = tmp_path / "elsewhere" / "ws"
    target.parent.mkdir()
    shutil.move(workspace.root, target)
    return Workspace(target, workspace.upstreams)


def test_abort_then_continue_after_the_workspace_moved(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    worktrees = _two_conflicts(workspace, upstream, tmp_path)
    (worktrees["proj/b"] / "pkg/core.py").write_text(
        BROKEN.replace("    return 3 + 0\n", "    return 34 + 0\n"))
    moved = _moved(workspace, tmp_path)
    b = moved.root / worktrees["proj/b"].relative_to(workspace.root)

    aborted = moved.run("sync", "--abort", "proj/a")
    assert aborted.code == 0, aborted.err
    # b's worktree is still one, its resolution in it
    assert git(b, "rev-parse", "--is-inside-work-tree") == "true"
    assert "return 34 + 0" in (b / "pkg/core.py").read_text()

    code, res = sync_json(moved, "--continue", "proj/b")
    assert code == 0, res
    assert res["result"] == "rebased" and res["version"] == upstream.head()
    version = moved.root / "patchsets/proj/b" / upstream.head()
    patch = next(version.glob("0001-*.patch")).read_text()
    assert "+    return 34 + 0" in patch
    assert meta(moved, "b")["current"] == upstream.head()


def test_the_cache_names_the_worktree_where_it_is_now(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    worktrees = _two_conflicts(workspace, upstream, tmp_path)
    moved = _moved(workspace, tmp_path)
    result = moved.run("sync", "--abort", "proj/a")
    assert result.code == 0, result.err
    b = moved.root / worktrees["proj/b"].relative_to(workspace.root)
    common = Path(git(b, "rev-parse", "--path-format=absolute", "--git-common-dir"))
    listed = git(common, "worktree", "list", "--porcelain")
    assert f"worktree {b}\n" in listed + "\n" and "prunable" not in listed
