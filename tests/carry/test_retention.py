"""The version retention rule: the working tree keeps what matters, git keeps the rest."""

from __future__ import annotations

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


def _versions(ws: Workspace) -> list[str]:
    folder = ws.root / "patchsets" / "proj" / "keep"
    return sorted(p.name for p in folder.iterdir() if p.is_dir())


def _carry(ws: Workspace, upstream: Repo, times: int, start: int = 0) -> None:
    """``times`` upstream commits, each followed by `contrib sync --commit`."""
    for i in range(start, start + times):
        upstream.commit(f"docs: note {i}", {f"docs/note{i}.md": f"note {i}\n"})
        result = ws.run("sync", "--commit", "--json")
        assert result.code == 0, result.err


@pytest.fixture
def kept(workspace: Workspace, upstream: Repo, tmp_path: Path) -> Workspace:
    """Patchset proj/keep in a workspace that is a git repository, keep = 3."""
    add_patchset(workspace, upstream, tmp_path, "keep", [("core: f3 = 33", {"pkg/core.py": F3_PATCH})])
    workspace.write_config("\n[versions]\nkeep = 3\n")
    commit_workspace(workspace)
    return workspace


@pytest.mark.slow
def test_thirty_carries_leave_keep_plus_the_protected(kept: Workspace, upstream: Repo) -> None:
    _carry(kept, upstream, 30)
    versions = _versions(kept)
    assert len(versions) == 3 + 1  # the last three others and the current
    assert meta(kept, "keep")["current"] in versions
    assert git(kept.root, "status", "--porcelain") == ""  # each run committed its pruning
    log = kept.run("log", "proj/keep", "--json").json
    assert isinstance(log, dict) and len(log["versions"]) == 31  # nothing out of reach
    pruned = [v for v in log["versions"] if v["pruned"]]
    assert len(pruned) == 31 - 4 and all(v["where"].startswith("git ") for v in pruned)
    assert all(v["patches"] == ["0001-core-f3-33.patch"] for v in pruned)


def test_pushed_gpu_validated_and_tagged_versions_are_never_pruned(
        kept: Workspace, upstream: Repo) -> None:
    ws = Ws(kept.root)
    first = ws.patchset("proj/keep").current
    write_bound(first, run_of(PASSING, host=host_facts([Gpu("NVIDIA H200", "9.0")])))
    _carry(kept, upstream, 1)
    ps = ws.patchset("proj/keep")
    pushed = ps.current.base
    add_event(ps.meta, Event(How.PUSH, pushed, detail="pushed to me/proj"))
    ps.set_pr(PrRecord(repo="up/proj", number=1, version=pushed))  # the PR head shows it
    ps.save_meta()
    _carry(kept, upstream, 1, start=1)
    tagged = meta(kept, "keep")["current"]
    git(upstream.path, "tag", "v1.0", tagged)  # a release: the version at it stays
    assert git(kept.root, "status", "--porcelain") == ""  # sync --commit took them along
    _carry(kept, upstream, 6, start=3)
    versions = _versions(kept)
    assert {first.base, pushed, tagged} <= set(versions)
    assert len(versions) == 3 + 1 + 3


def test_nothing_is_pruned_without_history_to_keep_it(workspace: Workspace, upstream: Repo,
                                                      tmp_path: Path) -> None:
    add_patchset(workspace, upstream, tmp_path, "keep", [("core: f3 = 33", {"pkg/core.py": F3_PATCH})])
    workspace.write_config("\n[versions]\nkeep = 1\n")
    for i in range(4):  # not a git repository: every folder stays
        upstream.commit(f"docs: note {i}", {f"docs/note{i}.md": "x\n"})
        assert workspace.run("sync").code == 0
    assert len(_versions(workspace)) == 5
    doctor = workspace.run("doctor", "--json").json
    assert isinstance(doctor, dict)
    [check] = [c for c in doctor["checks"] if c["name"] == "versions"]
    assert "not a git repository" in check["detail"]
    commit_workspace(workspace)
    (workspace.root / "patchsets" / "proj" / "keep" / _versions(workspace)[0] / "NOTES").write_text(
        "mine, not committed\n")
    upstream.commit("docs: more", {"docs/more.md": "x\n"})
    assert workspace.run("sync", "--commit").code == 0
    left = _versions(workspace)
    assert len(left) == 3  # the changed folder, the recent one, the current
    assert any((workspace.root / "patchsets/proj/keep" / v / "NOTES").is_file() for v in left)


def test_keep_all_turns_pruning_off(kept: Workspace, upstream: Repo) -> None:
    kept.write_config('\n[versions]\nkeep = "all"\n')
    _carry(kept, upstream, 5)
    assert len(_versions(kept)) == 6


def test_log_and_diff_reach_a_pruned_version(kept: Workspace, upstream: Repo) -> None:
    first = meta(kept, "keep")["current"]
    _carry(kept, upstream, 5)
    assert first not in _versions(kept)
    diff = kept.run("diff", "proj/keep", first[:10], "current", "--json")
    assert diff.code == 0, diff.err
    assert isinstance(diff.json, dict) and diff.json["old"] == first
    log = kept.run("log", "proj/keep")
    assert f"{first[:12]} " in log.out and "pruned; in the workspace's git history" in log.out


def test_a_bad_keep_is_one_line_naming_the_line(kept: Workspace) -> None:
    kept.write_config("\n[versions]\nkeep = -1\n")
    result = kept.run("status", "--no-fetch")
    assert result.code == 2 and "contrib.toml:" in result.err and "versions.keep" in result.err
