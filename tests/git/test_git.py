"""contrib.git.repo: repository operations (errors scrubbed, batch reads, commits)."""

from __future__ import annotations

from pathlib import Path

import pytest

from contrib.analysis.tree import GitTree
from contrib.errors import GitError
from contrib.git.repo import Git
from contrib.secrets import register_secret
from testing.gitutil import Repo, git


def test_read_blobs_in_one_batch(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r")
    sha = repo.commit("files", {"a.py": "A = 1\n", "pkg/b.py": "", "c.bin": "x\ny\n\n",
                                "pkg/sub/d.py": "D\n"})
    git = Git(repo.path)
    blobs = git.read_blobs(sha, ["a.py", "pkg/b.py", "c.bin", "missing.py", "pkg", "a.py"])
    assert blobs == {"a.py": b"A = 1\n", "pkg/b.py": b"", "c.bin": b"x\ny\n\n",
                     "missing.py": None, "pkg": None}
    assert git.read_blob(sha, "pkg/sub/d.py") == b"D\n"


def test_git_tree_loads_a_suffix_at_once(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r")
    sha = repo.commit("files", {f"m{i}.py": f"X = {i}\n" for i in range(30)} | {"k.cu": "k\n"})
    calls: list[int] = []
    git = Git(repo.path)

    class Counting:
        def read_blob(self, rev: str, path: str) -> bytes | None:
            calls.append(1)
            return git.read_blob(rev, path)

        def read_blobs(self, rev: str, paths: list[str]) -> dict[str, bytes | None]:
            calls.append(len(paths))
            return git.read_blobs(rev, paths)

        def ls_tree_paths(self, rev: str) -> list[str]:
            return git.ls_tree_paths(rev)

    tree = GitTree(Counting(), sha)
    assert [tree.read_text(f"m{i}.py") for i in range(30)] == [f"X = {i}\n" for i in range(30)]
    assert tree.read_text("k.cu") == "k\n" and tree.read_text("nope.py") is None
    assert calls == [30, 1]


def test_errors_keep_stderr_and_hide_credentials(tmp_path: Path) -> None:
    register_secret("ghp_topsecret123")
    git = Git.init(tmp_path / "r")
    with pytest.raises(GitError) as info:
        git.run("fetch", "https://x-access-token:ghp_topsecret123@127.0.0.1:1/repo.git")
    message = str(info.value)
    assert "ghp_topsecret123" not in message and "fetch" in message
    with pytest.raises(GitError, match="unknown revision 'nope'"):
        git.rev_parse("nope")


def test_behind_counts_match_rev_list_for_every_kind_of_base(tmp_path: Path) -> None:
    """Bases on main, on a merged side branch, on an unmerged release branch, the tip."""
    repo = Repo(tmp_path / "r")
    early = repo.commit("one", {"a": "1"})
    mid = repo.commit("two", {"a": "2"})
    git_ = Git(repo.path)
    git_.run("checkout", "-q", "-b", "side")
    side = repo.commit("side work", {"s": "1"})
    git_.run("checkout", "-q", "-b", "release", mid)
    release = repo.commit("release fix", {"r": "1"})
    git_.run("checkout", "-q", "main")
    repo.commit("three", {"a": "3"})
    repo.merge("side", "merge side")
    tip = repo.commit("four", {"a": "4"})
    bases = [early, mid, side, release, tip]
    expected = {b: git_.count(f"{b}..{tip}") for b in bases}
    assert git_.behind_counts(tip, bases) == expected
    assert git_.behind_counts(tip, [release]) == {release: expected[release]}
    assert git_.behind_counts(tip, [tip]) == {tip: 0}
    dates = git_.commit_dates([early, "0" * 40, tip])
    assert set(dates) == {early, tip} and dates[tip].startswith("2023-11-14T")


def test_commit_paths_commits_only_those_paths_and_keeps_the_rest_staged(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r")
    repo.commit("start", {"ps/a.txt": "a\n", "ps/gone.txt": "g\n", "other.txt": "o\n"})
    (repo.path / "ps/a.txt").write_text("a2\n")
    (repo.path / "ps/new.txt").write_text("n\n")
    (repo.path / "ps/gone.txt").unlink()
    (repo.path / "other.txt").write_text("o2\n")
    git(repo.path, "add", "other.txt")  # the user's own staged change stays theirs
    before = repo.head()
    sha = Git(repo.path).commit_paths(["ps"], "ps: update", env={
        "GIT_AUTHOR_NAME": "Bot", "GIT_AUTHOR_EMAIL": "bot@example.com"})
    assert git(repo.path, "rev-parse", "HEAD^") == before and sha == repo.head()
    assert git(repo.path, "show", "--name-status", "--format=%an %s", "HEAD").split() == [
        "Bot", "ps:", "update", "M", "ps/a.txt", "D", "ps/gone.txt", "A", "ps/new.txt"]
    assert git(repo.path, "status", "--porcelain").splitlines() == ["M  other.txt"]
    assert not (repo.path / ".git" / "index.lock").exists()


def test_commit_paths_never_takes_the_index_lock_while_staging(tmp_path: Path) -> None:
    """Staging (the long part, hashing every file) happens on a copy: another git holding
    index.lock meanwhile does not stop the commit, and only the install step waits on it."""
    repo = Repo(tmp_path / "r")
    repo.commit("start", {"ps/a.txt": "a\n"})
    (repo.path / "ps/a.txt").write_text("a2\n")
    lock = repo.path / ".git" / "index.lock"
    lock.write_text("held by another git")
    with pytest.raises(GitError, match="index.lock"):
        Git(repo.path).commit_paths(["ps"], "ps: update")
    assert git(repo.path, "log", "-1", "--format=%s") == "ps: update"  # committed
    assert lock.read_text() == "held by another git"  # and the other git's lock untouched
    lock.unlink()
    git(repo.path, "reset", "-q", "--", "ps")
    assert git(repo.path, "status", "--porcelain") == ""
    # The next run finds HEAD has it all: no empty commit, the index brought in step.
    lock.write_text("held by another git")
    with pytest.raises(GitError, match="index.lock"):
        Git(repo.path).commit_paths(["ps"], "ps: again")
    lock.unlink()
    assert Git(repo.path).commit_paths(["ps"], "ps: again") is None
    assert git(repo.path, "log", "-1", "--format=%s") == "ps: update"
