"""Crash consistency of `contrib sync` and `contrib sync --continue` under SIGKILL at
named points of their work (:mod:`testing.crash`).

`sync` does a real rebase: upstream moved (a fetch, a carry with new context,
a new version folder and patchset.toml in one transaction).  Each trial gets
its own copy of the upstream cache, so the killed window covers the fetch
too, and the cache must stay usable (`git fsck`) after the kill.

`sync --continue` records a conflict the user resolved in the worktree.  Its
trials share the cache (each copy opens its own conflict worktree in it, as
several workspaces would), and the user's resolution must survive any kill:
the next `--continue` still finds it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from testing.crash import (
    choose,
    counted,
    fsck_cache,
    kill_trials,
    outcomes,
    own_cache,
    run,
    snapshot,
    tally,
    trial_cache,
)
from testing.gitutil import Repo, git
from testing.histories import Change, fast_import, filler
from testing.synchelp import add_patchset
from testing.workspace import SAMPLE, Workspace, run_contrib

pytestmark = pytest.mark.slow

CORE = SAMPLE["pkg/core.py"]
F3_PATCH = CORE.replace("    return 3\n", "    return 33\n")
BROKEN = CORE.replace("    return 3\n", "    return 3 + 0\n")
RESOLVED = BROKEN.replace("    return 3 + 0\n", "    return 33 + 0\n")


def _cache(isolated: Path) -> Path:
    return isolated / "contrib-cache"


def test_sync_killed_anywhere_is_all_or_nothing(workspace: Workspace, upstream: Repo,
                                                tmp_path: Path, isolated: Path) -> None:
    add_patchset(workspace, upstream, tmp_path, "f3",
                 [("core: make f3 return 33", {"pkg/core.py": F3_PATCH})])
    # Upstream moves: 40 commits, one of them shifting f3 (new context for the carry).
    moved = CORE.replace("def f0():\n", "# header\n\n\ndef f0():\n")
    fast_import(upstream, [*filler(20), Change("core: header", {"pkg/core.py": moved}),
                           *filler(20, start=20)])
    env = dict(os.environ)
    setup = own_cache(_cache(isolated), env)

    reference = tmp_path / "reference"
    shutil.copytree(workspace.root, reference)
    points = counted(reference, "sync", env=setup(reference))
    expected = snapshot(reference)
    assert expected != snapshot(workspace.root)  # a real new version was recorded

    def verify(ws: Path, outcome: str) -> None:
        fsck_cache(trial_cache(ws))

    trials = kill_trials(workspace.root, tmp_path, ("sync",), choose(points, 3_20261129, 12),
                         expected, env, setup=setup, verify=verify)
    print(tally("sync", trials, points))
    assert outcomes(trials) == {"before", "after"}


def test_sync_continue_killed_anywhere_keeps_the_resolution(
        workspace: Workspace, upstream: Repo, tmp_path: Path, isolated: Path) -> None:
    add_patchset(workspace, upstream, tmp_path, "f3",
                 [("core: make f3 return 33", {"pkg/core.py": F3_PATCH})])
    fast_import(upstream, [*filler(9), Change("core: f3 returns 3 + 0", {"pkg/core.py": BROKEN}),
                           *filler(10, start=9)])
    env = dict(os.environ)
    assert run(workspace.root, "status", env=env).returncode == 0  # fetch once: warm cache

    def conflict_resolved(ws: Path) -> dict[str, str]:
        """Run the sync that stops at the conflict, then resolve it as a user would."""
        res = run_contrib("sync", "--no-fetch", "--json", cwd=ws)
        assert res.code == 1, res.err
        [found] = res.json["results"]  # type: ignore[index]
        worktree = Path(found["conflict"]["worktree"])
        assert worktree.is_relative_to(ws)
        (worktree / "pkg/core.py").write_text(RESOLVED)
        return env

    args = ("sync", "--continue", "proj/f3")
    reference = tmp_path / "reference"
    shutil.copytree(workspace.root, reference)
    conflict_resolved(reference)
    points = counted(reference, *args, env=env)
    expected = snapshot(reference)
    assert any(b"+    return 33 + 0" in data for name, data in expected.items()
               if name.endswith(".patch"))

    def again(ws: Path, outcome: str) -> tuple[str, ...]:
        # Still pending (killed before it recorded, or before it cleaned up):
        # --continue again, and the resolution must still be there.  Otherwise a
        # plain sync finds the recorded version unchanged.
        pending = (ws / ".contrib" / "sync-state.json").exists()
        assert pending or outcome == "after"
        return args if pending else ("sync", "--no-fetch")

    def verify(ws: Path, outcome: str) -> None:
        if outcome == "final":
            assert not (ws / ".contrib" / "sync-state.json").exists()
        fsck_cache(_cache(isolated))

    trials = kill_trials(workspace.root, tmp_path, args, choose(points, 4_20261129, 12),
                         expected, env, setup=conflict_resolved, verify=verify, again=again)
    print(tally("sync --continue", trials, points))
    assert outcomes(trials) == {"before", "after"}


def test_continue_after_a_kill_inside_git_add(workspace: Workspace, upstream: Repo,
                                              tmp_path: Path) -> None:
    """The deterministic form of a trial that once failed: a `git add` killed inside
    --continue leaves the worktree's index.lock behind; the next --continue works."""
    add_patchset(workspace, upstream, tmp_path, "f3",
                 [("core: make f3 return 33", {"pkg/core.py": F3_PATCH})])
    fast_import(upstream, [*filler(3), Change("core: f3 returns 3 + 0", {"pkg/core.py": BROKEN})])
    res = run_contrib("sync", "--json", cwd=workspace.root)
    worktree = Path(res.json["results"][0]["conflict"]["worktree"])  # type: ignore[index]
    (worktree / "pkg/core.py").write_text(RESOLVED)
    stale = Path(git(worktree, "rev-parse", "--path-format=absolute", "--git-path", "index.lock"))
    stale.write_bytes(b"")  # what SIGKILL during `git add -u` leaves
    done = run_contrib("sync", "--continue", "--json", "proj/f3", cwd=workspace.root)
    assert done.code == 0, done.err
    assert done.json["results"][0]["result"] == "rebased"  # type: ignore[index]


def test_sync_that_prunes_killed_anywhere_is_all_or_nothing(
        workspace: Workspace, upstream: Repo, tmp_path: Path, isolated: Path) -> None:
    add_patchset(workspace, upstream, tmp_path, "f3",
                 [("core: make f3 return 33", {"pkg/core.py": F3_PATCH})])
    workspace.write_config("\n[versions]\nkeep = 1\n")
    git(workspace.root, "init", "-q")
    for i in range(4):  # four committed versions: the next carry prunes three of them
        fast_import(upstream, filler(1, start=100 + i))
        assert run_contrib("sync", cwd=workspace.root).code == 0
        git(workspace.root, "add", "-A")
        git(workspace.root, "commit", "-qm", f"version {i}", env={
            "GIT_AUTHOR_NAME": "w", "GIT_AUTHOR_EMAIL": "w@e", "GIT_COMMITTER_NAME": "w",
            "GIT_COMMITTER_EMAIL": "w@e"})
    fast_import(upstream, filler(10, start=200))
    env = dict(os.environ)
    setup = own_cache(_cache(isolated), env)
    reference = tmp_path / "reference"
    shutil.copytree(workspace.root, reference, symlinks=True)
    points = counted(reference, "sync", env=setup(reference))
    expected = snapshot(reference)
    folders = {p.name for p in (reference / "patchsets/proj/f3").iterdir() if p.is_dir()}
    assert len(folders) == 2  # the recent one and the new current: three pruned

    def verify(ws: Path, outcome: str) -> None:
        fsck_cache(trial_cache(ws))
        for folder in (ws / "patchsets/proj/f3").iterdir():  # never a half-removed folder
            if folder.is_dir():
                assert (folder / "series").is_file() and any(folder.glob("*.patch")), folder

    trials = kill_trials(workspace.root, tmp_path, ("sync",), choose(points, 4_20261201, 10),
                         expected, env, setup=setup, verify=verify)
    print(tally("sync (pruning)", trials, points))
    assert outcomes(trials) == {"before", "after"}


def test_two_target_sync_killed_anywhere_leaves_each_target_before_or_after(
        workspace: Workspace, upstream: Repo, tmp_path: Path, isolated: Path) -> None:
    import tomllib

    add_patchset(workspace, upstream, tmp_path, "f3",
                 [("core: make f3 return 33", {"pkg/core.py": F3_PATCH})])
    start = upstream.head()
    git(upstream.path, "branch", "release-1")
    fast_import(upstream, filler(15, start=300))  # main moves
    fast_import(upstream, filler(15, start=400), branch="release-1")
    meta = workspace.root / "patchsets/proj/f3/patchset.toml"
    meta.write_text('targets = ["release-1", "main"]\n' + meta.read_text())
    env = dict(os.environ)
    setup = own_cache(_cache(isolated), env)
    reference = tmp_path / "reference"
    shutil.copytree(workspace.root, reference, symlinks=True)
    points = counted(reference, "sync", env=setup(reference))
    after = tomllib.loads((reference / "patchsets/proj/f3/patchset.toml").read_text())
    done = {"release-1": after["current"], "main": after["target"]["main"]["current"]}
    assert start not in done.values() and done["release-1"] != done["main"]

    def verify(ws: Path, outcome: str) -> str:
        fsck_cache(trial_cache(ws))
        doc = tomllib.loads((ws / "patchsets/proj/f3/patchset.toml").read_text())
        state = {"release-1": doc, "main": doc.get("target", {}).get("main", {})}
        synced = set()
        for branch, table in state.items():  # each target wholly before or wholly after
            current = table.get("current", start)
            assert current in (start, done[branch]), (branch, current)
            assert (ws / "patchsets/proj/f3" / current / "series").is_file()
            if current == done[branch]:
                assert table["sync"]["result"] == "rebased", (branch, table)
                synced.add(branch)
            if outcome == "final":  # the next sync finished what the killed one began
                assert current == done[branch], (branch, current)
        return {0: "before", 1: "one target", 2: "after"}[len(synced)] \
            if outcome != "final" else outcome

    # expected None: tomlkit may place a blank line differently when the second target
    # is written by a later run; what must hold is each target's state (verify)
    trials = kill_trials(workspace.root, tmp_path, ("sync",), choose(points, 5_20261201, 10),
                         None, env, setup=setup, verify=verify)
    print(tally("sync (two targets)", trials, points))
    assert outcomes(trials) == {"before", "one target", "after"}
