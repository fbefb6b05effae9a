"""contrib.git.blobs: one `git cat-file --batch` answers every read of an operation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from contrib.git import process
from contrib.git.repo import Git
from testing.gitutil import Repo


def test_one_process_answers_many_reads_in_order(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r")
    first = repo.commit("one", {"a.py": "A = 1\n", "dir/b.txt": "b\n", "e": ""})
    second = repo.commit("two", {"a.py": "A = 2\n"})
    git = Git(repo.path)
    started: list[str] = []
    process.trace_commands(started.append)
    try:
        reads = [git.read_blob(first, "a.py"), git.read_blob(second, "a.py"),
                 git.read_blob(first, "dir"), git.read_blob(first, "nope"),
                 git.read_blob(second, "e"), git.read_blob(first, "dir/b.txt"),
                 git.read_blob(first, "bad\nname")]
    finally:
        process.trace_commands(None)
    assert reads == [b"A = 1\n", b"A = 2\n", None, None, b"", b"b\n", None]
    assert [line for line in started if "cat-file" in line] == [
        f"git -C {repo.path} cat-file --batch"]


def test_objects_written_after_the_reader_started_are_found(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r")
    first = repo.commit("one", {"a.py": "A = 1\n"})
    git = Git(repo.path)
    assert git.read_blob(first, "a.py") == b"A = 1\n"
    later = repo.commit("two", {"a.py": "A = 2\n"})
    assert git.read_blob(later, "a.py") == b"A = 2\n"


def test_a_reader_whose_process_died_starts_again(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r")
    sha = repo.commit("one", {"a.py": "A\n"})
    git = Git(repo.path)
    assert git.read_blob(sha, "a.py") == b"A\n"
    git.blobs.close()
    assert git.read_blob(sha, "a.py") == b"A\n"


@pytest.mark.parametrize("leaked", ["GIT_DIR", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"])
def test_leaked_git_variables_never_reach_git_but_config_entries_do(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, leaked: str) -> None:
    monkeypatch.setenv(leaked, str(tmp_path / "elsewhere"))
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "contrib.probe")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "kept")
    env = process.clean_env()
    assert leaked not in env
    assert (env["GIT_CONFIG_COUNT"], env["GIT_CONFIG_KEY_0"], env["GIT_CONFIG_VALUE_0"]) == (
        "1", "contrib.probe", "kept")
    repo = Repo(tmp_path / "r")
    repo.commit("one", {"a": "a\n"})
    assert Git(repo.path).run("config", "contrib.probe") == "kept"
    assert os.environ[leaked]  # the caller's own environment is left alone


def test_a_batch_larger_than_the_pipe_does_not_deadlock(tmp_path: Path) -> None:
    # ~1500 requests at a full sha are ~120 KB of names: more than a pipe holds.
    repo = Repo(tmp_path / "r")
    names = [f"pkg/module_with_a_long_name_{n:04}.py" for n in range(1500)]
    sha = repo.commit("many", {name: f"X = {n}\n" * 20 for n, name in enumerate(names)})
    found = Git(repo.path).read_blobs(sha, names)
    assert found[names[-1]] == b"X = 1499\n" * 20 and all(found.values())
