"""Crash consistency of `contrib autopilot --push` under SIGKILL at seeded random moments.

Each trial copies a workspace whose upstream moved (two patchsets to rebase,
validate, open a PR for, commit and push) and runs the real CLI in a
subprocess against its own fake GitHub, bare fork and bare workspace origin.
After each kill: never a second PR for a patchset nor a second dashboard;
the next run succeeds and leaves one PR per patchset, one open dashboard, a
clean workspace repository whose commit is pushed, every current version
validated, and the same patchset files as an uninterrupted run.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from contrib.patchset import Workspace
from contrib.record import version_standing
from tests.autopilot_scene import FORK, UPSTREAM, WSREPO, Scene
from tests.fake_github import FakeGitHub
from tests.gitutil import Repo, git
from tests.reliability.conftest import PLANTED
from tests.reliability.crash import delays, kill_trial, snapshot, tally, timed

pytestmark = pytest.mark.slow
MARKER = "<!-- contrib:dashboard -->"


def _files(ws: Path) -> dict[str, bytes]:
    """The patchset files, without what differs between two good runs: contrib.toml
    (each trial has its own servers) and validation.json (run ids and times)."""
    return {k: v for k, v in snapshot(ws).items()
            if k != "contrib.toml" and not k.endswith("validation.json")}


class Trials:
    """One fake GitHub, fork and origin per trial workspace; the checks after a kill."""

    def __init__(self, scene: Scene) -> None:
        self.scene = scene
        self.fakes: dict[Path, FakeGitHub] = {}
        self.expected: dict[str, bytes] = {}

    def setup(self, ws: Path) -> dict[str, str]:
        fork, origin = ws.parent / f"{ws.name}-fork.git", ws.parent / f"{ws.name}-origin.git"
        shutil.copytree(self.scene.fork, fork)
        shutil.copytree(self.scene.origin, origin)
        fake = FakeGitHub(PLANTED)
        fake.start()
        fake.add_repo(UPSTREAM, git_dir=str(self.scene.upstream.path / ".git"))
        fake.add_repo(FORK, fork_of=UPSTREAM, git_dir=str(fork))
        fake.add_repo(WSREPO)
        self.fakes[ws] = fake
        config = ws / "contrib.toml"
        config.write_text(config.read_text().replace(self.scene.fake.url, fake.url)
                          .replace(str(self.scene.fork), str(fork)))
        git(ws, "remote", "set-url", "origin", str(origin))
        return dict(os.environ)

    def verify(self, ws: Path, outcome: str) -> str:
        fake = self.fakes[ws]
        heads = [p["head"]["ref"] for p in fake.pulls(UPSTREAM)]
        assert len(heads) == len(set(heads)), heads  # never two PRs for one patchset
        dashboards = [i for i in fake.issues(WSREPO) if (i["body"] or "").startswith(MARKER)]
        assert len(dashboards) <= 1, dashboards
        if outcome != "final":
            return "after" if _files(ws) == self.expected else outcome
        assert sorted(heads) == ["contrib/f3", "contrib/f7"]
        assert [i["state"] for i in dashboards] == ["open"]
        assert git(ws, "status", "--porcelain", "--", "patchsets") == ""
        origin = ws.parent / f"{ws.name}-origin.git"
        assert git(origin, "rev-parse", "refs/heads/main") == git(ws, "rev-parse", "HEAD")
        assert _files(ws) == self.expected
        for ps in Workspace(ws).patchsets():
            assert version_standing(ps.current).bound, ps.target
        fake.stop()
        return outcome


def test_autopilot_killed_anywhere(tmp_path: Path, upstream: Repo,
                                   planted_github: FakeGitHub) -> None:
    scene = Scene(tmp_path, upstream, planted_github, prs="create")
    upstream.commit("docs: more", {"docs/more.md": "more\n"})
    trials = Trials(scene)
    args = ("autopilot", "--push")
    reference = tmp_path / "reference"
    shutil.copytree(scene.root, reference)
    took = timed(reference, *args, env=trials.setup(reference))
    trials.expected = _files(reference)
    trials.verify(reference, "final")
    results = [kill_trial(scene.root, tmp_path, args, took * frac, None, {},
                          setup=trials.setup, verify=trials.verify)
               for frac in delays(seed=10_20261130, count=8, low=0.1, high=1.05)]
    for fake in trials.fakes.values():
        fake.stop()
    print(tally("autopilot", results), f"(reference run {took:.2f}s)")
    assert sum(r.killed for r in results) >= 4
