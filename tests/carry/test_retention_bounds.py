"""Retention stays bounded with PRs and GPU runs, and never loses or leaks a user's file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from contrib.carry.versions import Event, How, add_event
from contrib.validate.report import host_facts
from contrib.validate.testrun import Gpu
from contrib.workspace.model import Workspace as Ws
from contrib.workspace.schema import PrRecord
from testing.gitutil import Repo, git
from testing.recordutil import PASSING, run_of, write_bound
from testing.synchelp import F3_PATCH, add_patchset, commit_workspace, meta
from testing.workspace import Workspace

IDENTITY = {"GIT_AUTHOR_NAME": "w", "GIT_AUTHOR_EMAIL": "w@e", "GIT_COMMITTER_NAME": "w",
            "GIT_COMMITTER_EMAIL": "w@e"}
H200 = [Gpu("NVIDIA H200", "9.0")]


def _folder(ws: Workspace) -> Path:
    return ws.root / "patchsets" / "proj" / "keep"


def _versions(ws: Workspace) -> list[str]:
    return sorted(p.name for p in _folder(ws).iterdir() if p.is_dir())


def _carry(ws: Workspace, upstream: Repo, times: int, start: int, *args: str) -> str:
    """``times`` upstream commits, each followed by `contrib sync ARGS`; the last current."""
    for i in range(start, start + times):
        upstream.commit(f"docs: note {i}", {f"docs/note{i}.md": f"note {i}\n"})
        result = ws.run("sync", *args)
        assert result.code == 0, result.err
    return str(meta(ws, "keep")["current"])


def _gpu_run(ws: Workspace, base: str, arch: str) -> None:
    version = Ws(ws.root).patchset("proj/keep").version(base)
    write_bound(version, run_of(PASSING, arch=arch, host=host_facts(H200)))
    git(ws.root, "add", "-A")
    git(ws.root, "commit", "-qm", f"gpu run {arch}", env=IDENTITY)


@pytest.fixture
def kept(workspace: Workspace, upstream: Repo, tmp_path: Path) -> Workspace:
    """Patchset proj/keep in a workspace that is a git repository, keep = 1."""
    add_patchset(workspace, upstream, tmp_path, "keep", [("core: f3 = 33", {"pkg/core.py": F3_PATCH})])
    workspace.write_config("\n[versions]\nkeep = 1\n")
    commit_workspace(workspace)
    return workspace


def test_only_the_pr_head_and_the_latest_gpu_run_per_arch_are_protected(
        kept: Workspace, upstream: Repo) -> None:
    v0 = str(meta(kept, "keep")["current"])
    _gpu_run(kept, v0, "sm_100a")
    v1 = _carry(kept, upstream, 1, 0, "--commit")
    _gpu_run(kept, v1, "sm_120a")
    v2 = _carry(kept, upstream, 1, 1, "--commit")
    _gpu_run(kept, v2, "sm_120a")  # newer: v1's sm_120a run is no longer the latest
    pushes = []
    for i in range(2, 5):  # each of three versions pushed; the PR head shows the last
        base = _carry(kept, upstream, 1, i, "--commit")
        ps = Ws(kept.root).patchset("proj/keep")
        add_event(ps.meta, Event(How.PUSH, base, detail="pushed to me/proj"))
        ps.set_pr(PrRecord(repo="up/proj", number=1, version=base,
                           previous_version=pushes[-1] if pushes else None))
        ps.save_meta()
        git(kept.root, "commit", "-qam", "push", env=IDENTITY)
        pushes.append(base)
    current = _carry(kept, upstream, 4, 5, "--commit")
    assert set(_versions(kept)) == {v0, v2, pushes[-1], current, _recent(kept, current)}
    assert v1 not in _versions(kept) and pushes[0] not in _versions(kept)
    log = kept.run("log", "proj/keep", "--json").json
    assert isinstance(log, dict) and {v1, *pushes} <= {v["version"] for v in log["versions"]}


def _recent(ws: Workspace, current: str) -> str:
    ps = Ws(ws.root).patchset("proj/keep")
    [other] = [v.base for v in ps.versions() if v.base != current
               and not (v.dir / "validation.json").is_file() and v.base != ps.pr.version]  # type: ignore[union-attr]
    return other


def test_a_folder_holding_an_ignored_file_is_kept(kept: Workspace, upstream: Repo) -> None:
    first = str(meta(kept, "keep")["current"])
    (kept.root / ".gitignore").write_text("NOTES.local\n")
    git(kept.root, "add", ".gitignore")
    git(kept.root, "commit", "-qm", "ignore notes", env=IDENTITY)
    notes = _folder(kept) / first / "NOTES.local"
    notes.write_text("mine, in no commit\n")
    assert "NOTES" not in git(kept.root, "status", "--porcelain", "--ignored=no")
    _carry(kept, upstream, 4, 0, "--commit")
    assert notes.read_text() == "mine, in no commit\n" and first in _versions(kept)


def test_a_pruned_version_is_in_log_and_diff_before_the_removal_is_committed(
        kept: Workspace, upstream: Repo) -> None:
    first = str(meta(kept, "keep")["current"])
    _carry(kept, upstream, 3, 0)  # no --commit: HEAD still holds the first folder
    assert first not in _versions(kept)
    assert f"patchsets/proj/keep/{first}/series" in git(kept.root, "status", "--porcelain")
    log = kept.run("log", "proj/keep", "--json").json
    assert isinstance(log, dict)
    [row] = [v for v in log["versions"] if v["version"] == first]
    assert row["pruned"] and row["where"].startswith("git ")
    diff = kept.run("diff", "proj/keep", first[:10], "current", "--json")
    assert diff.code == 0, diff.err
    assert isinstance(diff.json, dict) and diff.json["old"] == first


@pytest.mark.parametrize("link", ["pruned", "pruned/proj--keep"])
def test_a_symlinked_pruned_cache_is_never_written_through(
        kept: Workspace, upstream: Repo, tmp_path: Path, link: str) -> None:
    _carry(kept, upstream, 3, 0, "--commit")
    outside = tmp_path / "outside"
    outside.mkdir()
    state = kept.root / ".contrib"
    shutil.rmtree(state / "pruned", ignore_errors=True)
    (state / link).parent.mkdir(parents=True, exist_ok=True)
    (state / link).symlink_to(outside, target_is_directory=True)
    result = kept.run("log", "proj/keep")
    assert result.code == 2 and "symlink" in result.err, (result.out, result.err)
    assert list(outside.iterdir()) == []


def test_a_folder_not_named_by_a_sha_is_never_a_version(kept: Workspace,
                                                        upstream: Repo) -> None:
    odd = _folder(kept) / "old"
    odd.mkdir()
    (odd / "series").write_text("0001-x.patch\n")
    (odd / "0001-x.patch").write_text("not a version\n")
    git(kept.root, "add", "-A")
    git(kept.root, "commit", "-qm", "an odd folder", env=IDENTITY)
    git(kept.root, "rm", "-rq", str(odd))
    git(kept.root, "commit", "-qm", "gone again", env=IDENTITY)
    result = kept.run("log", "proj/keep", "--json")
    assert result.code == 0, result.err
    assert isinstance(result.json, dict)
    assert "old" not in {v["version"] for v in result.json["versions"]}
    assert not (kept.root / ".contrib" / "pruned" / "proj--keep" / "old").exists()


def test_keep_1_a_second_targets_current_survives_while_only_the_first_moves(
        kept: Workspace, upstream: Repo) -> None:
    git(upstream.path, "checkout", "-q", "-b", "release-1")  # moves once, then stays
    upstream.commit("release: a fix", {"docs/fix.md": "fix\n"})
    git(upstream.path, "checkout", "-q", "main")
    path = _folder(kept) / "patchset.toml"
    path.write_text('targets = ["main", "release-1"]\n' + path.read_text())
    git(kept.root, "commit", "-qam", "two lines", env=IDENTITY)
    upstream.commit("docs: main moves", {"docs/m.md": "m\n"})
    assert kept.run("sync", "--commit").code == 0
    second = Ws(kept.root).patchset("proj/keep@release-1").current.base
    current = _carry(kept, upstream, 5, 0, "--commit")  # main alone moves, five times
    assert second in _versions(kept) and current in _versions(kept)
    assert Ws(kept.root).patchset("proj/keep@release-1").current.base == second
    assert second != current


@pytest.mark.parametrize("where", ["pruned", "pruned/proj--keep", "pruned/proj--keep/FIRST"])
def test_a_file_where_a_pruned_copy_goes_is_one_line_naming_it(
        kept: Workspace, upstream: Repo, where: str) -> None:
    first = str(meta(kept, "keep")["current"])
    _carry(kept, upstream, 3, 0, "--commit")
    assert first not in _versions(kept)
    state = kept.root / ".contrib"
    shutil.rmtree(state / "pruned", ignore_errors=True)
    path = state / where.replace("FIRST", first)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("not a folder\n")
    for args in (("log", "proj/keep"), ("diff", "proj/keep", first[:10], "current")):
        result = kept.run(*args)
        assert result.code == 2, (result.out, result.err)
        assert result.err == (f"contrib: error: {path}: is a file where contrib keeps a folder "
                              "of its copies of pruned versions; move it away or delete it "
                              "(contrib writes the folder again from the workspace's git "
                              "history)\n")
        assert path.read_text() == "not a folder\n"
    path.unlink()
    assert kept.run("log", "proj/keep").code == 0


def test_a_users_file_in_a_version_folder_is_committed_and_never_pruned(
        kept: Workspace, upstream: Repo) -> None:
    first = str(meta(kept, "keep")["current"])
    notes = _folder(kept) / first / "NOTES.md"
    notes.write_text("why f3 is 33: see the H200 run\n")  # untracked, in no commit
    second = _carry(kept, upstream, 1, 0, "--commit")
    rel = f"patchsets/proj/keep/{first}/NOTES.md"
    assert git(kept.root, "ls-files", "--", rel) == rel, "--commit commits the user's file"
    _carry(kept, upstream, 3, 1, "--commit")
    # keep = 1: every other plain version went; the one holding the notes stays.
    assert notes.read_text() == "why f3 is 33: see the H200 run\n"
    assert first in _versions(kept) and second not in _versions(kept)
    assert git(kept.root, "status", "--porcelain") == ""
