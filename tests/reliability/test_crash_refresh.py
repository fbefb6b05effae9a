"""Crash consistency of `contrib refresh` under SIGKILL.

The patchset is opened as branch contrib/two in a clone outside the
workspace (shared by every trial, only read), one commit amended and one
added; refresh replaces the current version's patches and sets its
validation.json aside.  Each trial gets its own copy of the upstream cache
(refresh fetches into it), killed at a named point of its work: the workspace is
afterwards as before or fully refreshed, never between, and the next refresh
succeeds and leaves the refreshed state.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from contrib.workspace.model import Workspace as Ws
from testing.crash import (
    choose,
    counted,
    fsck_cache,
    kill_trials,
    outcomes,
    own_cache,
    snapshot,
    tally,
    trial_cache,
)
from testing.gitutil import Repo, git
from testing.recordutil import PASSING, run_of, write_bound
from testing.synchelp import F3_F5, F3_PATCH, add_patchset, commit_in
from testing.workspace import Workspace

pytestmark = pytest.mark.slow


def test_refresh_killed_anywhere_is_all_or_nothing(workspace: Workspace, upstream: Repo,
                                                   tmp_path: Path, isolated: Path) -> None:
    base = add_patchset(workspace, upstream, tmp_path, "two", [
        ("core: make f3 return 33", {"pkg/core.py": F3_PATCH}),
        ("docs: describe f3", {"docs/f3.md": "f3 returns 33\n"})])
    write_bound(Ws(workspace.root).patchset("proj/two").version(base), run_of(PASSING))
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(upstream.path), str(clone))
    assert workspace.run("edit", "proj/two", "--repo", str(clone)).code == 0
    git(clone, "checkout", "-q", "contrib/two")
    commit_in(clone, "docs: describe f3", {"docs/f3.md": "f3 returns 33 now\n"}, "--amend")
    commit_in(clone, "core: make f5 return 55", {"pkg/core.py": F3_F5})
    git(clone, "checkout", "-q", "main")
    env = dict(os.environ)
    setup = own_cache(isolated / "contrib-cache", env)

    def verify(ws: Path, outcome: str) -> None:
        fsck_cache(trial_cache(ws))
        if outcome in ("after", "final"):
            assert not (ws / "patchsets/proj/two" / base / "validation.json").exists()

    args = ("refresh", "proj/two")
    reference = tmp_path / "reference"
    shutil.copytree(workspace.root, reference)
    points = counted(reference, *args, env=setup(reference))
    expected = snapshot(reference)
    assert expected != snapshot(workspace.root)
    assert any(b"+f3 returns 33 now" in data for data in expected.values())

    def check(ws: Path, outcome: str) -> None:
        verify(ws, outcome)
        if outcome == "after":
            assert snapshot(ws) == expected

    trials = kill_trials(workspace.root, tmp_path, args, choose(points, 11_20261130, 11),
                         expected, env, setup=setup, verify=check)
    print(tally("refresh", trials, points))
    assert outcomes(trials) == {"before", "after"}
