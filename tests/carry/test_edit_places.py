"""Where `contrib edit` may put its branch and worktree.

* ``--path`` inside the workspace's ``patchsets/`` or ``.contrib/`` is refused
  (exit 2, one line) before anything is made; elsewhere in the workspace is fine.
* The upstream cache is shared by every workspace using that upstream, so the
  worktree branch is kept apart per workspace (``contrib/WSID/NAME``): two
  workspaces with a patchset of the same name both edit and refresh without
  --force, while a clone's branch stays ``contrib/NAME``.
* An edit recorded on the cache's ``contrib/NAME`` (before branches were kept
  apart) is still read, refreshed and, on the next edit, moved to its own branch.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from testing.gitutil import Repo, git
from testing.synchelp import F3_PATCH, add_patchset, commit_in, version_dir
from testing.workspace import Workspace


@pytest.fixture
def two(workspace: Workspace, upstream: Repo, tmp_path: Path) -> str:
    """Patchset proj/two: f3 -> 33, then a docs file; returns its base."""
    return add_patchset(workspace, upstream, tmp_path, "two", [
        ("core: make f3 return 33", {"pkg/core.py": F3_PATCH}),
        ("docs: describe f3", {"docs/f3.md": "f3 returns 33\n"})])


def _everything(root: Path) -> list[str]:
    """Every path under ``root``, contrib's private state included."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _cache() -> Path:
    [cache] = (Path(os.environ["CONTRIB_CACHE"]) / "upstreams").glob("proj-*.git")
    return cache


def _worktrees() -> list[str]:
    out = git(_cache(), "worktree", "list", "--porcelain")
    return [line for line in out.splitlines() if line.startswith("worktree ")]


# -- --path ----------------------------------------------------------------------------

@pytest.mark.parametrize("where", ["patchsets/proj/two/wt", "patchsets", "patchsets/new-folder",
                                   ".contrib/edit/mine", ".contrib", "{root}/patchsets/x",
                                   "elsewhere/../patchsets/y"])
def test_edit_refuses_a_path_inside_patchsets_or_contrib_state(
        workspace: Workspace, two: str, where: str) -> None:
    assert workspace.run("status", "--no-fetch").code == 0  # the cache exists
    (workspace.root / ".contrib").mkdir(exist_ok=True)
    before, trees = _everything(workspace.root), _worktrees()
    path = where.format(root=workspace.root)
    result = workspace.run("edit", "proj/two", "--path", path)
    assert result.code == 2, (result.out, result.err)
    assert result.err.count("\n") == 1 and "Traceback" not in result.err
    assert result.err.startswith(f"contrib: error: --path {path}: inside the workspace's ")
    assert "choose a folder outside" in result.err
    assert _everything(workspace.root) == before and _worktrees() == trees


def test_edit_allows_a_path_elsewhere_in_the_workspace(workspace: Workspace, two: str) -> None:
    result = workspace.run("edit", "--json", "proj/two", "--path", "work/two")
    assert result.code == 0, result.err
    doc = result.json
    assert isinstance(doc, dict)
    place = workspace.root / "work" / "two"
    assert Path(doc["path"]) == place and (place / "pkg" / "core.py").is_file()
    commit_in(place, "docs: describe f3", {"docs/f3.md": "f3 returns 33 (work)\n"}, "--amend")
    refreshed = workspace.run("refresh", "--json", "proj/two")
    assert refreshed.code == 0, refreshed.err
    assert refreshed.json["result"] == "replaced"  # type: ignore[index]


# -- two workspaces, one cache -------------------------------------------------------------

def test_two_workspaces_edit_and_refresh_a_patchset_of_the_same_name(
        upstream: Repo, tmp_path: Path) -> None:
    spaces = []
    for label in ("a", "b"):
        root = tmp_path / f"ws-{label}"
        root.mkdir()
        ws = Workspace(root, {"proj": upstream})
        ws.write_config()
        (tmp_path / label).mkdir()
        base = add_patchset(ws, upstream, tmp_path / label, "seed", [
            (f"docs: note {label}", {f"docs/{label}.md": f"from {label}\n"})])
        spaces.append((label, ws, base))
    opened = {}
    for label, ws, _ in spaces:
        result = ws.run("edit", "--json", "proj/seed")
        assert result.code == 0, (label, result.err)
        opened[label] = result.json
    branches = {label: doc["branch"] for label, doc in opened.items()}  # type: ignore[index]
    assert branches["a"] != branches["b"]
    assert all(b.startswith("contrib/") and b.endswith("/seed") for b in branches.values())
    for label, _, _ in spaces:
        tree = Path(opened[label]["path"])  # type: ignore[index]
        assert git(tree, "rev-parse", "--abbrev-ref", "HEAD") == branches[label]
        commit_in(tree, f"docs: note {label}", {f"docs/{label}.md": f"from {label}, edited\n"},
                  "--amend")
    for label, ws, base in spaces:  # each refresh takes its own workspace's commits
        result = ws.run("refresh", "--json", "proj/seed")
        assert result.code == 0, (label, result.err)
        assert result.json["result"] == "replaced"  # type: ignore[index]
        [patch] = version_dir(ws, "seed", base).glob("*.patch")
        assert f"+from {label}, edited".encode() in patch.read_bytes()
        again = ws.run("edit", "--json", "proj/seed")
        assert again.code == 0, (label, again.err)
        assert again.json["branch"] == branches[label]  # type: ignore[index]
    # the same patchset in a clone is branch contrib/seed there, for either workspace
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(upstream.path), str(clone))
    for _, ws, _ in spaces:
        result = ws.run("edit", "--json", "proj/seed", "--repo", str(clone), "--force")
        assert result.code == 0, result.err
        assert result.json["branch"] == "contrib/seed"  # type: ignore[index]


def test_an_edit_recorded_on_the_shared_branch_still_reads(workspace: Workspace,
                                                           two: str) -> None:
    """The layout of an edit made before branches were kept apart per workspace."""
    doc = workspace.run("edit", "--json", "proj/two").json
    assert isinstance(doc, dict)
    tree = Path(doc["path"])
    git(tree, "branch", "-m", doc["branch"], "contrib/two")
    state_file = workspace.root / ".contrib" / "edit-state.json"
    state = json.loads(state_file.read_text())
    state["edits"]["proj/two"]["branch"] = "contrib/two"
    state_file.write_text(json.dumps(state))
    again = workspace.run("edit", "--json", "proj/two")  # open as it is: nothing moves
    assert again.code == 0, again.err
    assert (again.json["changed"], again.json["branch"]) == (False, "contrib/two")  # type: ignore[index]
    commit_in(tree, "docs: describe f3", {"docs/f3.md": "legacy edit\n"}, "--amend")
    refused = workspace.run("edit", "proj/two")  # unrefreshed work on it is guarded
    assert refused.code == 2 and "contrib refresh proj/two" in refused.err
    refreshed = workspace.run("refresh", "--json", "proj/two")
    assert refreshed.code == 0, refreshed.err
    assert refreshed.json["result"] == "replaced"  # type: ignore[index]
    assert b"+legacy edit" in b"".join(p.read_bytes()
                                      for p in version_dir(workspace, "two", two).glob("*.patch"))
    moved = workspace.run("edit", "--json", "proj/two")  # now onto this workspace's own branch
    assert moved.code == 0, moved.err
    branch = moved.json["branch"]  # type: ignore[index]
    assert branch != "contrib/two" and branch.endswith("/two")
    assert git(tree, "rev-parse", "--abbrev-ref", "HEAD") == branch
    assert git(_cache(), "rev-parse", "--verify", "-q", "refs/heads/contrib/two")  # left alone
