"""`contrib diff` and `contrib log` on a patchset with three versions.

v1 made by `new`, v2 by `sync` onto a newer upstream commit, v3 by `edit` +
`git rebase` + an amended patch + `refresh`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contrib.workspace.model import Workspace as Ws
from testing.fake_github import FakeGitHub, fake_github_fixture  # noqa: F401
from testing.gitutil import Repo, git
from testing.pr_scene import HEAD, Scene
from testing.recordutil import PASSING, run_of, write_bound
from testing.synchelp import F3_F5, USER, add_patchset, commit_in
from testing.workspace import Workspace, run_contrib

DOC = "".join(f"line {i} of the f3 notes\n" for i in range(8)) + "f3 returns 33.\n"


@pytest.fixture
def three(workspace: Workspace, upstream: Repo, tmp_path: Path) -> list[str]:
    v1 = add_patchset(workspace, upstream, tmp_path, "two", [
        ("core: make f3 return 33", {"pkg/core.py": F3_F5.replace("return 55", "return 5")}),
        ("docs: describe f3", {"docs/f3.md": DOC})])
    v2 = upstream.commit("upstream: a", {"docs/a.md": "a\n"})
    assert workspace.run("sync", "proj/two").code == 0
    write_bound(Ws(workspace.root).patchset("proj/two").version(v2), run_of(PASSING))
    v3 = upstream.commit("upstream: b", {"docs/b.md": "b\n"})
    tree = Path(workspace.run("edit", "--json", "proj/two").json["path"])  # type: ignore[index]
    git(tree, "fetch", "-q", "origin")
    git(tree, "rebase", "-q", "origin/main", env=USER)
    commit_in(tree, "docs: describe f3", {"docs/f3.md": DOC.replace("33.", "33, always.")}, "--amend")
    result = workspace.run("refresh", "proj/two")
    assert result.code == 0, result.err
    return [v1, v2, v3]


def run_json(ws: Workspace, *args: str) -> dict[str, Any]:
    result = ws.run(*args, "--json")
    assert result.code == 0, (result.out, result.err)
    doc = result.json
    assert isinstance(doc, dict)
    return doc


def test_diff_defaults_to_previous_and_current(workspace: Workspace, three: list[str]) -> None:
    v1, v2, v3 = three
    doc = run_json(workspace, "diff", "proj/two")
    assert (doc["old"], doc["new"]) == (v2, v3)
    text = doc["range_diff"]
    assert "1:" in text and "= 1:" in text  # the first patch is unchanged
    assert "! 2:" in text and "+f3 returns 33, always." in text  # the second was amended
    named = run_json(workspace, "diff", "proj/two", v1[:8], v2[:8])
    assert (named["old"], named["new"]) == (v1, v2)
    assert "!" not in named["range_diff"]  # sync carried the same patches
    human = workspace.run("diff", "proj/two", v1[:8])
    assert human.code == 0 and "f3 returns 33, always" in human.out


def test_diff_names_bad_versions(workspace: Workspace, three: list[str]) -> None:
    result = workspace.run("diff", "proj/two", "ffff")
    assert result.code == 2 and "names no version" in result.err
    assert three[0][:12] in result.err


def test_log_lists_versions_oldest_first_with_how_they_were_made(
        workspace: Workspace, three: list[str]) -> None:
    v1, v2, v3 = three
    doc = run_json(workspace, "log", "proj/two")
    rows = doc["versions"]
    assert [r["version"] for r in rows] == [v1, v2, v3]
    assert [[(m["how"], m.get("result")) for m in r["made"]] for r in rows] == [
        [("new", None)], [("sync", "rebased")], [("refresh", "rebased")]]
    assert rows[1]["made"][0]["previous"] == v1 and rows[2]["made"][0]["previous"] == v2
    assert [r["validation"]["validated"] for r in rows] == [False, True, False]
    assert rows[1]["validation"]["summary"] == "sm_120a: passed"
    assert [r["current"] for r in rows] == [False, False, True]
    human = workspace.run("log", "proj/two")
    assert human.code == 0
    assert human.out.index(v1[:12]) < human.out.index(v2[:12]) < human.out.index(v3[:12])
    assert "refresh (rebased) from " + v2[:12] in human.out


def test_log_shows_the_pr_pushes_of_a_version(tmp_path: Path, upstream: Repo,
                                              fake_github: FakeGitHub,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", fake_github.token)
    scene = Scene(tmp_path, upstream, fake_github)
    code, [res] = scene.run()
    assert code == 0, res
    result = run_contrib("log", "--json", "proj/sm120", cwd=scene.root)
    assert result.code == 0, result.err
    [row] = result.json["versions"]  # type: ignore[index]
    assert [p["detail"] for p in row["pushes"]] == [f"pushed {res['tip']} to {HEAD}"]
    assert (row["pr"]["number"], row["validation"]["validated"]) == (1, True)
    scene.run()  # nothing new to push: no second entry
    again = run_contrib("log", "--json", "proj/sm120", cwd=scene.root).json
    assert len(again["versions"][0]["pushes"]) == 1  # type: ignore[index]
