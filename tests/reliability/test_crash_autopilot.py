"""Crash consistency of `contrib autopilot --push` under SIGKILL at named points of its work.

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
from typing import Any

import pytest

from contrib.forge.github import GitHubForge
from contrib.record import version_standing
from contrib.workspace.model import Workspace
from testing.audit import PLANTED
from testing.autopilot_scene import FORK, UPSTREAM, WSREPO, Scene
from testing.crash import around_commits, choose, counted, kill_trials, outcomes, snapshot, tally
from testing.fake_github import FakeGitHub
from testing.gitutil import Repo, git

pytestmark = pytest.mark.slow
MARKER = "<!-- contrib:dashboard -->"


def _files(ws: Path) -> dict[str, bytes]:
    """The patchset files, without what differs between two good runs: contrib.toml
    (each trial has its own servers) and validation.json (run ids and times)."""
    return {k: v for k, v in snapshot(ws).items()
            if k != "contrib.toml" and not k.endswith("validation.json")}


class Trials:
    """One fake GitHub, fork and origin per trial workspace; the checks after a kill.

    ``prs`` and ``issues`` are what GitHub already holds when the run starts (an
    earlier run's PRs and dashboard), re-made on each trial's fake.
    """

    def __init__(self, scene: Scene, prs: list[dict[str, Any]] | None = None,
                 issues: list[dict[str, Any]] | None = None) -> None:
        self.scene, self.prs, self.issues = scene, prs or [], issues or []
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
        for pr in sorted(self.prs, key=lambda p: p["number"]):
            _post_pr(fake, pr)
        for issue in self.issues:
            fake.add_issue(WSREPO, issue["title"], issue["body"])
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
        if outcome != "final":  # a patchset's files changed, not all of them yet: midway
            return {"before": "before", "after": "midway"}[outcome] \
                if _files(ws) != self.expected else "after"
        assert sorted(heads) == ["contrib/f3", "contrib/f7"]
        assert [i["state"] for i in dashboards] == ["open"]
        version = f"version={self.scene.upstream.head()}"
        assert all(version in p["body"] for p in fake.pulls(UPSTREAM))  # current PRs
        assert git(ws, "status", "--porcelain", "--", "patchsets") == ""
        origin = ws.parent / f"{ws.name}-origin.git"
        assert git(origin, "rev-parse", "refs/heads/main") == git(ws, "rev-parse", "HEAD")
        assert _files(ws) == self.expected
        for ps in Workspace(ws).patchsets():
            assert version_standing(ps.current).bound, ps.target
        fake.stop()
        return outcome


def _post_pr(fake: FakeGitHub, pr: dict[str, Any]) -> None:
    forge = GitHubForge(fake.url, PLANTED, retries=0, write_interval=0.0)
    made = forge.create_draft_pr(UPSTREAM, head=pr["head"]["label"], base=pr["base"]["ref"],
                                 title=pr["title"], body=pr["body"])
    assert made.number == pr["number"]


def test_autopilot_killed_anywhere(tmp_path: Path, upstream: Repo,
                                   planted_github: FakeGitHub) -> None:
    """The first run: PRs and the dashboard are created."""
    scene = Scene(tmp_path, upstream, planted_github, prs="create")
    upstream.commit("docs: more", {"docs/more.md": "more\n"})
    _trials(scene, tmp_path, Trials(scene), 10_20261130, "autopilot (create)")


def test_autopilot_update_killed_anywhere(tmp_path: Path, upstream: Repo,
                                          planted_github: FakeGitHub) -> None:
    """A later run: upstream moved, PRs and the dashboard exist and are updated."""
    scene = Scene(tmp_path, upstream, planted_github, prs="create")
    code, doc, _ = scene.run()
    assert code == 0, doc
    prs, issues = planted_github.pulls(UPSTREAM), planted_github.issues(WSREPO)
    upstream.commit("docs: more", {"docs/more.md": "more\n"})
    _trials(scene, tmp_path, Trials(scene, prs, issues), 11_20261130, "autopilot (update)")


def _trials(scene: Scene, tmp_path: Path, trials: Trials, seed: int, label: str) -> None:
    args = ("autopilot", "--push")
    reference = tmp_path / "reference"
    shutil.copytree(scene.root, reference)
    points = counted(reference, *args, env=trials.setup(reference))
    trials.expected = _files(reference)
    trials.verify(reference, "final")
    # Each patchset's transaction, killed just before and just after its commit point:
    # the first leaves one patchset carried and not the other (midway).
    results = kill_trials(scene.root, tmp_path, args, choose(points, seed, 8, around_commits),
                          None, {}, setup=trials.setup, verify=trials.verify)
    for fake in trials.fakes.values():
        fake.stop()
    print(tally(label, results, points))
    assert outcomes(results) == {"before", "midway", "after"}
