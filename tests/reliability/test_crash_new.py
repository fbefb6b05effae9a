"""Crash consistency of `contrib new` under SIGKILL at named points of its work."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from testing.crash import choose, counted, kill_trials, outcomes, run, snapshot, tally
from testing.gitutil import Repo
from testing.workspace import Workspace, make_patch

pytestmark = pytest.mark.slow


def test_new_killed_anywhere_is_all_or_nothing(workspace: Workspace, upstream: Repo,
                                               tmp_path: Path) -> None:
    patches = make_patch(upstream, tmp_path, {"pkg/x.py": "X = 1\n", "pkg/y.py": "Y = 2\n"},
                         "add x and y")
    env = dict(os.environ)
    args = ("new", "proj", "xy", "--base", "main", "--patch", str(patches[0]))
    # Warm the shared cache: the clone, and what the first `new` adds to it (the trials
    # share it, so each passes the points of a second run).
    warm = tmp_path / "warm"
    shutil.copytree(workspace.root, warm)
    assert run(warm, *args, env=env).returncode == 0
    reference = tmp_path / "reference"
    shutil.copytree(workspace.root, reference)
    points = counted(reference, *args, env=env)
    expected = snapshot(reference)

    def again(ws: Path, outcome: str) -> tuple[str, ...]:
        return args if outcome == "before" else ("status", "--no-fetch")

    trials = kill_trials(workspace.root, tmp_path, args, choose(points, 20261129, 11),
                         expected, env, again=again)
    print(tally("new", trials, points))
    # The first point and the plan's write are before the commit point, `commit` and
    # the last point after it: both outcomes, by construction.
    assert outcomes(trials) == {"before", "after"}
