"""`contrib diff` after a same-base `refresh`: the kept superseded series -> the current one.

A refresh of a branch still on the recorded base replaces the version folder
in place and keeps the old series under ``.contrib/superseded/``; that old
series is what came before the current one, so ``diff`` shows it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testing.gitutil import Repo
from testing.synchelp import F3_PATCH, add_patchset, commit_in
from testing.workspace import Workspace

# Long enough that range-diff pairs the amended patch with the old one.
DOC = "".join(f"line {i} of the f3 notes\n" for i in range(8)) + "f3 returns 33.\n"


def _json(ws: Workspace, *args: str) -> dict[str, Any]:
    result = ws.run(*args, "--json")
    assert result.code == 0, (result.out, result.err)
    doc = result.json
    assert isinstance(doc, dict)
    return doc


def _edit_and_refresh(ws: Workspace, text: str) -> dict[str, Any]:
    tree = Path(_json(ws, "edit", "proj/two")["path"])
    commit_in(tree, "docs: describe f3", {"docs/f3.md": text}, "--amend")
    return _json(ws, "refresh", "proj/two")


def test_diff_after_a_same_base_refresh_shows_superseded_to_current(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    base = add_patchset(workspace, upstream, tmp_path, "two", [
        ("core: make f3 return 33", {"pkg/core.py": F3_PATCH}),
        ("docs: describe f3", {"docs/f3.md": DOC})])
    first = _edit_and_refresh(workspace, DOC.replace("33.", "33, always."))
    assert (first["result"], first["version"]) == ("replaced", base)
    assert first["superseded"] and Path(first["superseded"]).is_dir()

    doc = _json(workspace, "diff", "proj/two")
    assert (doc["old"], doc["new"]) == (base, base)
    assert doc["superseded"] == first["superseded"]
    text = doc["range_diff"]
    assert "= 1:" in text  # the first patch is the same
    assert "! 2:" in text and "+f3 returns 33, always." in text  # the second was amended
    human = workspace.run("diff", "proj/two")
    assert human.code == 0, human.err
    assert f"{base[:12]} (superseded, kept in {first['superseded']}) -> {base[:12]}" in human.out

    # A second replace: the diff is against the series just replaced, not the first one.
    second = _edit_and_refresh(workspace, DOC.replace("33.", "33, always and forever."))
    assert second["result"] == "replaced" and second["superseded"] != first["superseded"]
    again = _json(workspace, "diff", "proj/two")
    assert again["superseded"] == second["superseded"]
    assert "! 2:" in again["range_diff"]
    assert "-+f3 returns 33, always.\n" in again["range_diff"]
    assert "++f3 returns 33, always and forever.\n" in again["range_diff"]


def test_diff_after_a_sync_is_still_previous_version_to_current(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    """A replace at an older base does not hide the version before the current one."""
    base = add_patchset(workspace, upstream, tmp_path, "two", [
        ("core: make f3 return 33", {"pkg/core.py": F3_PATCH})])
    _edit_and_refresh(workspace, "notes\n")
    newer = upstream.commit("upstream: more", {"docs/more.md": "more\n"})
    assert workspace.run("sync", "proj/two").code == 0
    doc = _json(workspace, "diff", "proj/two")
    assert (doc["old"], doc["new"], doc["superseded"]) == (base, newer, None)


def test_diff_of_a_single_version_shows_it_against_its_base(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    base = add_patchset(workspace, upstream, tmp_path, "two", [
        ("core: make f3 return 33", {"pkg/core.py": F3_PATCH})])
    result = workspace.run("diff", "proj/two")
    assert result.code == 0, result.err
    assert f"proj/two: {base[:12]} is its first version" in result.out
    assert "pkg/core.py | " in result.out and "+    return 33" in result.out
    doc = _json(workspace, "diff", "proj/two")
    assert (doc["old"], doc["new"]) == (None, base) and "return 33" in doc["diff"]
