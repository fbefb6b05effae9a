"""Crash consistency of `contrib new` under SIGKILL at seeded random moments."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from testing.crash import delays, kill_trials, run, snapshot, tally, timed
from testing.gitutil import Repo
from testing.workspace import Workspace, make_patch

pytestmark = pytest.mark.slow


def test_new_killed_anywhere_is_all_or_nothing(workspace: Workspace, upstream: Repo,
                                               tmp_path: Path) -> None:
    patches = make_patch(upstream, tmp_path, {"pkg/x.py": "X = 1\n", "pkg/y.py": "Y = 2\n"},
                         "add x and y")
    env = dict(os.environ)
    args = ("new", "proj", "xy", "--base", "main", "--patch", str(patches[0]))
    # Warm the shared cache so trials measure the write path, not the clone.
    assert run(workspace.root, "status", "--no-fetch", env=env).returncode == 0
    reference = tmp_path / "reference"
    shutil.copytree(workspace.root, reference)
    took = timed(reference, *args, env=env)
    expected = snapshot(reference)
    def again(ws: Path, outcome: str) -> tuple[str, ...]:
        return args if outcome == "before" else ("status", "--no-fetch")

    trials = kill_trials(workspace.root, tmp_path, args, took,
                         delays(seed=20261129, count=12, low=0.05, high=1.2),
                         expected, env, again=again)
    print(tally("new", trials), f"(reference run {took:.2f}s)")
    outcomes = [t.outcome for t in trials]
    # Seeded delays span the run: some kills land before, some after the commit.
    assert len(outcomes) == 12
    assert "before" in outcomes and "after" in outcomes, outcomes
