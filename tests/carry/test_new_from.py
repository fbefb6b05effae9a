"""`contrib new --from-pr N | --from-branch URL BRANCH`: start a patchset from review work."""

from __future__ import annotations

from pathlib import Path

from testing.gitutil import Repo, git
from testing.synchelp import F3_PATCH, meta, series, version_dir
from testing.workspace import Workspace


def _pr_branch(upstream: Repo, name: str, commits: list[tuple[str, dict[str, str]]]) -> str:
    """Commits on branch ``name`` off the upstream's main; main moves on after it."""
    git(upstream.path, "checkout", "-q", "-b", name)
    who, upstream.who = upstream.who, "Pr Author"
    for message, files in commits:
        upstream.commit(message, files)
    upstream.who = who
    tip = upstream.head()
    git(upstream.path, "checkout", "-q", "main")
    return tip


def test_new_from_pr_uses_the_merge_base_and_the_pr_commits(workspace: Workspace,
                                                             upstream: Repo) -> None:
    fork_point = upstream.head()
    tip = _pr_branch(upstream, "feature", [
        ("core: make f3 return 33", {"pkg/core.py": F3_PATCH}),
        ("docs: f3", {"docs/f3.md": "33\n"})])
    git(upstream.path, "update-ref", "refs/pull/7/head", tip)  # as GitHub publishes a PR
    upstream.commit("upstream moves on", {"docs/later.md": "later\n"})
    result = workspace.run("new", "--json", "proj", "pr7", "--from-pr", "7")
    assert result.code == 0, result.err
    doc = result.json
    assert isinstance(doc, dict)
    assert (doc["base"], doc["source"]) == (fork_point, "PR #7")
    assert series(workspace, "pr7", fork_point) == ["0001-core-make-f3-return-33.patch",
                                                    "0002-docs-f3.patch"]
    first = (version_dir(workspace, "pr7", fork_point) / doc["patches"][0]).read_bytes()
    assert b"From: Pr Author" in first and first.startswith(b"From " + b"0" * 40)
    history = meta(workspace, "pr7")["history"]
    assert [(h["how"], h["version"], h["detail"]) for h in history] == [
        ("new", fork_point, "PR #7")]
    # a PR URL of this upstream works too; another repository's is refused
    url = "https://github.com/upstream-org/proj/pull/7"
    assert workspace.run("new", "proj", "pr7b", "--from-pr", url).code == 0
    other = workspace.run("new", "proj", "pr7c", "--from-pr", "https://github.com/x/y/pull/7")
    assert other.code == 2 and "x/y" in other.err


def test_new_from_pr_refuses_merges_and_missing_prs(workspace: Workspace,
                                                    upstream: Repo) -> None:
    base = upstream.head()
    side = _pr_branch(upstream, "side", [("side", {"side.txt": "s\n"})])
    git(upstream.path, "checkout", "-q", "-b", "merged", base)
    upstream.commit("core: f3", {"pkg/core.py": F3_PATCH})
    upstream.merge(side, "merge side into the PR")
    git(upstream.path, "update-ref", "refs/pull/8/head", upstream.head())
    git(upstream.path, "checkout", "-q", "main")
    result = workspace.run("new", "proj", "pr8", "--from-pr", "8")
    assert result.code == 2 and "merge commit" in result.err
    assert "merge side into the PR" in result.err and "--squash" in result.err
    missing = workspace.run("new", "proj", "pr9", "--from-pr", "9")
    assert missing.code == 2 and "PR #9" in missing.err
    assert not (workspace.root / "patchsets").exists()
    # --squash takes the PR's whole change (its merge included) as one patch on the base
    taken = workspace.run("new", "proj/pr8", "--from-pr", "8", "--squash", "--json")
    assert taken.code == 0, taken.err
    assert taken.json["base"] == base and len(taken.json["patches"]) == 1  # type: ignore[index]
    patch = (version_dir(workspace, "pr8", base) / taken.json["patches"][0]).read_text()  # type: ignore[index]
    assert "+s" in patch and "return 33" in patch and "- side" in patch and "- core: f3" in patch


def test_new_from_a_fork_branch(workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    fork = tmp_path / "fork"
    git(tmp_path, "clone", "-q", str(upstream.path), str(fork))
    base = upstream.head()
    git(fork, "checkout", "-q", "-b", "sm120")
    (fork / "pkg" / "core.py").write_text(F3_PATCH)
    git(fork, "commit", "-qam", "core: f3 for sm120", env={
        "GIT_AUTHOR_NAME": "Fork Dev", "GIT_AUTHOR_EMAIL": "f@example.com",
        "GIT_AUTHOR_DATE": "1700200000 +0000", "GIT_COMMITTER_NAME": "Fork Dev",
        "GIT_COMMITTER_EMAIL": "f@example.com", "GIT_COMMITTER_DATE": "1700200000 +0000"})
    result = workspace.run("new", "--json", "proj", "fork", "--from-branch", str(fork), "sm120")
    assert result.code == 0, result.err
    doc = result.json
    assert isinstance(doc, dict) and doc["base"] == base
    assert doc["patches"] == ["0001-core-f3-for-sm120.patch"]
    nothing = workspace.run("new", "proj", "fork2", "--from-branch", str(fork), "main")
    assert nothing.code == 2 and "no commits" in nothing.err
