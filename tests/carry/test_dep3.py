"""DEP-3 fields in the patch files: written by `new`, kept and brought up to date by
`sync` and `refresh`, and a sign-off only where the upstream's guide asks for one."""

from __future__ import annotations

from pathlib import Path

import pytest

from contrib.carry.dep3 import trailers
from contrib.carry.series import split_mail
from contrib.git.repo import Git
from contrib.workspace.model import Workspace as Ws
from contrib.workspace.schema import PrRecord
from testing.gitutil import Repo, git
from testing.synchelp import F3_PATCH, add_patchset, commit_in, meta, series, version_dir
from testing.workspace import Workspace, make_patch

DAY1, DAY2, DAY3 = "1700000000", "1710000000", "1720000000"  # 2023-11-14, 2024-03-09, 2024-07-03
DCO = ("# Contributing\n\nSend a pull request.\n\n## Sign your work\n\nEvery commit needs a "
       "`Signed-off-by:` line: it certifies the Developer Certificate of Origin.\n")


def fields(ws: Workspace, name: str, sha: str) -> list[dict[str, list[str]]]:
    """Each patch's trailers, key -> values, in series order (as git reads them)."""
    git_ = Git(ws.upstreams["proj"].path)
    out = []
    for patch in series(ws, name, sha):
        raw = (version_dir(ws, name, sha) / patch).read_bytes()
        found: dict[str, list[str]] = {}
        for key, value in trailers(git_, [split_mail(git_, patch, raw).message])[0]:
            found.setdefault(key, []).append(value)
        out.append(found)
    return out


def test_new_writes_the_fields_and_sync_keeps_them(workspace: Workspace, upstream: Repo,
                                                   tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    base = add_patchset(workspace, upstream, tmp_path, "f3", [
        ("core: make f3 return 33", {"pkg/core.py": F3_PATCH}),
        ("docs: describe f3", {"docs/f3.md": "f3 returns 33\n"})])
    first = fields(workspace, "f3", base)
    assert first == [{"Origin": ["vendor, contrib patchset proj/f3"], "Forwarded": ["no"],
                      "Last-Update": ["2023-11-14"]}] * 2
    # upstream moves: lines above f3 shift it down, another file changes; a later day
    upstream.commit("core: a header", {"pkg/core.py": "HEADER = 1\n\n\n"
                                       + upstream.read("pkg/core.py"), "NOTES.md": "n\n"})
    monkeypatch.setenv("SOURCE_DATE_EPOCH", DAY2)
    assert workspace.run("sync").code == 0
    moved = upstream.head()
    assert meta(workspace, "f3")["current"] == moved
    hunks = [(version_dir(workspace, "f3", sha) / series(workspace, "f3", sha)[0]
              ).read_text().split("@@")[1] for sha in (base, moved)]
    assert hunks == [" -11,7 +11,7 ", " -14,7 +14,7 "]  # the patch moved, its change did not
    assert fields(workspace, "f3", moved) == first
    # open-pr recorded a PR: the next version written says it was forwarded there
    ps = Ws(workspace.root).patchset("proj/f3")
    url = "https://github.com/upstream-org/proj/pull/7"
    ps.set_pr(PrRecord(repo="upstream-org/proj", number=7, url=url, state="open"))
    ps.save_meta()
    upstream.commit("docs: more notes", {"NOTES.md": "n\nm\n"})
    monkeypatch.setenv("SOURCE_DATE_EPOCH", DAY3)
    assert workspace.run("sync").code == 0
    third = upstream.head()
    assert fields(workspace, "f3", third) == [
        {"Origin": ["vendor, contrib patchset proj/f3"], "Forwarded": [url],
         "Last-Update": ["2023-11-14"]}] * 2
    assert [h["at"][:10] for h in meta(workspace, "f3")["history"]] == [
        "2023-11-14", "2024-03-09", "2024-07-03"]


def test_refresh_dates_only_the_patch_whose_change_changed(
        workspace: Workspace, upstream: Repo, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    base = add_patchset(workspace, upstream, tmp_path, "two", [
        ("core: make f3 return 33", {"pkg/core.py": F3_PATCH}),
        ("docs: describe f3", {"docs/f3.md": "f3 returns 33\n"})])
    edit = workspace.run("edit", "--json", "proj/two")
    assert edit.code == 0, edit.err
    tree = Path(edit.json["path"])  # type: ignore[index]
    assert "Last-Update: 2023-11-14" in git(tree, "log", "-1", "--format=%B")
    commit_in(tree, "docs: describe f3", {"docs/f3.md": "f3 returns 33 now\n"}, "--amend")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", DAY2)
    result = workspace.run("refresh", "--json", "proj/two")
    assert result.code == 0, result.err
    assert result.json["result"] == "replaced"  # type: ignore[index]
    dates = [f["Last-Update"] for f in fields(workspace, "two", base)]
    assert dates == [["2023-11-14"], ["2024-03-09"]]
    # the amend wrote a message without the fields: they were kept from the version
    assert all(f["Origin"] == ["vendor, contrib patchset proj/two"]
               for f in fields(workspace, "two", base))
    again = workspace.run("refresh", "--json", "proj/two")
    assert again.json["result"] == "unchanged"  # type: ignore[index]


def test_signed_off_only_where_the_guide_asks(workspace: Workspace, upstream: Repo,
                                              tmp_path: Path) -> None:
    add_patchset(workspace, upstream, tmp_path, "plain", [("core: f3", {"pkg/core.py": F3_PATCH})])
    upstream.commit("docs: how to contribute", {"CONTRIBUTING.md": DCO})
    base = add_patchset(workspace, upstream, tmp_path, "dco", [
        ("core: f3\n\nSigned-off-by: Patch Author <patch.author@example.com>",
         {"pkg/core.py": F3_PATCH})])
    plain = meta(workspace, "plain")["current"]
    assert "Signed-off-by" not in fields(workspace, "plain", plain)[0]
    assert fields(workspace, "dco", base)[0]["Signed-off-by"] == [
        "Patch Author <patch.author@example.com>", "Test User <test@example.com>"]
    # the plain one moves onto the commit whose guide asks: sync signs it off
    assert workspace.run("sync", "proj/plain").code == 0
    assert fields(workspace, "plain", base)[0]["Signed-off-by"] == ["Test User <test@example.com>"]


def test_a_guide_that_asks_with_no_identity_is_refused(workspace: Workspace, upstream: Repo,
                                                       tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    upstream.commit("docs", {"docs/contributing.md": "Commit with `git commit -s` (DCO).\n"})
    patches = make_patch(upstream, tmp_path, {"pkg/core.py": F3_PATCH}, "core: f3")
    bare = tmp_path / "no-identity.gitconfig"
    bare.write_text("[init]\n\tdefaultBranch = main\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(bare))
    result = workspace.run("new", "proj", "dco", "--base", "main", "--patch", str(patches[0]))
    assert result.code == 2
    assert result.err.count("\n") == 1 and "docs/contributing.md:1 asks for Signed-off-by" \
        in result.err and "git config user.name" in result.err
    assert not (workspace.root / "patchsets" / "proj" / "dco").exists()


def test_a_patch_taken_from_an_upstream_pr_names_it(workspace: Workspace,
                                                    upstream: Repo) -> None:
    fork_point = upstream.head()
    git(upstream.path, "checkout", "-q", "-b", "feature")
    tip = upstream.commit("core: make f3 return 33", {"pkg/core.py": F3_PATCH})
    git(upstream.path, "checkout", "-q", "main")
    git(upstream.path, "update-ref", "refs/pull/7/head", tip)  # as GitHub publishes a PR
    assert workspace.run("new", "proj", "pr7", "--from-pr", "7").code == 0
    url = "https://github.com/upstream-org/proj/pull/7"
    assert fields(workspace, "pr7", fork_point) == [
        {"Origin": [f"upstream, {url}"], "Forwarded": [url], "Last-Update": ["2023-11-14"]}]


@pytest.mark.parametrize(("files", "where"), [
    ({"CONTRIBUTING.md": "# How\n\nOpen a PR.\n\nWe take the Developer Certificate of Origin."},
     ("CONTRIBUTING.md", 5)),
    ({".github/CONTRIBUTING.md": "Commits need a Signed-off-by line.\n"},
     (".github/CONTRIBUTING.md", 1)),
    ({"docs/CONTRIBUTING.rst": "Contributing\n============\n\nUse ``git commit --signoff``.\n"},
     ("docs/CONTRIBUTING.rst", 4)),
    ({".github/dco.yml": "require:\n  members: false\n"}, (".github/dco.yml", 0)),
    ({"CONTRIBUTING.md": "# How\n\nRun the tests, then open a PR.\n"}, None),
    ({"docs/guide/dco.md": "Signed-off-by: nobody reads this file\n"}, None),
])
def test_where_an_upstream_asks_for_the_sign_off(upstream: Repo, files: dict[str, str],
                                                 where: tuple[str, int] | None) -> None:
    from contrib.carry.signoff import asks_for_signoff

    commit = upstream.commit("docs", files)
    asked = asks_for_signoff(Git(upstream.path), commit)
    assert (asked.path, asked.line) == where if asked is not None else where is None


def test_forwarded_follows_the_pr_then_the_status() -> None:
    from contrib.carry.dep3 import Forward, forwarded
    from contrib.workspace.schema import UpstreamStatus as S

    url = "https://github.com/o/r/pull/1"
    assert forwarded(url, S.PENDING) == url
    assert [forwarded(None, s) for s in (S.PENDING, S.DRAFT, S.SUBMITTED, S.BACKPORT,
                                         S.INAPPROPRIATE, S.UPSTREAMED)] == [
        Forward.NO, Forward.NO, Forward.YES, Forward.NOT_NEEDED, Forward.NOT_NEEDED,
        Forward.NOT_NEEDED]


def test_a_conflict_resolved_by_hand_dates_that_patch(workspace: Workspace, upstream: Repo,
                                                      tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    add_patchset(workspace, upstream, tmp_path, "f3", [
        ("core: make f3 return 33", {"pkg/core.py": F3_PATCH}),
        ("docs: describe f3", {"docs/f3.md": "f3 returns 33\n"})])
    broken = upstream.read("pkg/core.py").replace("    return 3\n", "    return 3 + 0\n")
    breaking = upstream.commit("core: f3 returns 3 + 0", {"pkg/core.py": broken})
    tip = upstream.commit("docs: later", {"NOTES.md": "n\n"})
    conflict = workspace.run("sync", "--json")
    assert conflict.code == 1
    worktree = Path(conflict.json["results"][0]["conflict"]["worktree"])  # type: ignore[index]
    (worktree / "pkg/core.py").write_text(broken.replace("return 3 + 0", "return 33 + 0"))
    monkeypatch.setenv("SOURCE_DATE_EPOCH", DAY2)
    assert workspace.run("sync", "--continue", "proj/f3").code == 0
    for sha in (breaking, tip):  # the resolved version, and the one carried on from it
        assert [f["Last-Update"] for f in fields(workspace, "f3", sha)] == [
            ["2024-03-09"], ["2023-11-14"]]
