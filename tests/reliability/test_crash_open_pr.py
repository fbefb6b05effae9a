"""Crash consistency of `contrib open-pr` under SIGKILL at named points of its work.

Each trial runs the real CLI in a subprocess (token from GITHUB_TOKEN, the
fake GitHub's address in contrib.toml's api_url) against its own fake GitHub
over real HTTP and its own real bare fork.  After each kill: never two PRs;
the fork branch is absent (or the old push) or exactly the expected commits;
patchset.toml is whole and either as before, as after, or recording the
push alone (open-pr records a push before it creates the PR, so a later
failure never orphans it), with the PR not yet current ("pushed") or current
but not recorded ("opened"); and the next run ends in the reference state
with exactly one PR.  Each state is reached by construction: the kills land at
named points (:mod:`testing.crash`) and while GitHub holds the PR's request.

Two scenarios: the first PR of a patchset (create), and the PR of a rebased
patchset (force-push with lease, PATCH the body).
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from testing.audit import PLANTED
from testing.crash import Midway, choose, counted, kill_trials, outcomes, run, snapshot, tally
from testing.fake_github import FakeGitHub
from testing.gitutil import Repo, git
from testing.pr_scene import FORK, UPSTREAM, Scene

pytestmark = pytest.mark.slow

BRANCH = "refs/heads/contrib/sm120"
META = "patchsets/proj/sm120/patchset.toml"
PULLS = f"/repos/{UPSTREAM}/pulls"


def _tip(fork: Path) -> str | None:
    return git(fork, "for-each-ref", "--format=%(objectname)", BRANCH) or None


def _user_files(ws: Path) -> dict[str, bytes]:
    """The workspace minus contrib.toml (each trial points it at its own servers)."""
    return {k: v for k, v in snapshot(ws).items() if k != "contrib.toml"}


class Trials:
    """One fake GitHub and one fork per trial workspace; the checks after a kill."""

    def __init__(self, scene: Scene, old_tip: str | None, old_pr: dict[str, Any] | None) -> None:
        self.scene, self.old_tip, self.old_pr = scene, old_tip, old_pr
        self.fakes: dict[Path, FakeGitHub] = {}
        self.expected: dict[str, bytes] = {}
        self.tip = ""

    def setup(self, ws: Path) -> dict[str, str]:
        fork = ws.parent / f"{ws.name}-fork.git"
        shutil.copytree(self.scene.fork, fork)
        fake = FakeGitHub(PLANTED)
        fake.start()
        fake.add_repo(UPSTREAM, git_dir=str(self.scene.upstream.path / ".git"))
        fake.add_repo(FORK, fork_of=UPSTREAM, git_dir=str(fork))
        if self.old_pr is not None:  # the PR the earlier push opened
            _post_pr(fake, self.old_pr)
        self.fakes[ws] = fake
        config = ws / "contrib.toml"
        config.write_text(config.read_text().replace(self.scene.fake.url, fake.url)
                          .replace(str(self.scene.fork), str(fork)))
        return dict(os.environ)

    def verify(self, ws: Path, outcome: str) -> str:
        fake, fork = self.fakes[ws], ws.parent / f"{ws.name}-fork.git"
        if outcome != "final":
            _receive_side_survives(fork)
        prs = fake.pulls(UPSTREAM)
        assert len(prs) <= 1, prs  # never two PRs
        tip = _tip(fork)
        assert tip in (self.old_tip, self.tip), (tip, self.old_tip, self.tip)
        if tip == self.tip:  # exactly the expected commits on the recorded base
            assert git(fork, "rev-list", "--count", f"{self.scene.version_dir().name}..{tip}") \
                == "1"
        meta = (ws / META).read_text()
        if outcome == "final":
            [pr] = prs
            assert pr["state"] == "open" and pr["head"]["sha"] == self.tip == tip
            assert f"version={self.scene.version_dir().name}" in pr["body"]
            assert _user_files(ws) == self.expected
            fake.stop()
            return outcome
        if outcome == "before":
            return outcome
        # The push is recorded; the PR is not yet current ("pushed"), or current on
        # GitHub and not yet recorded ("opened"), or both ("after").
        assert tip == self.tip and f'pushed = "{self.tip}"' in meta, meta
        version = f"version={self.scene.version_dir().name}"
        if not any(version in pr["body"] for pr in prs):
            return "pushed"
        return "after" if _user_files(ws) == self.expected else "opened"

    def at_request(self, method: str, path: str) -> Midway:
        """A kill while GitHub has the PR's request (``arm`` makes it hang): the push is
        recorded and the PR not yet current, whatever the machine's speed."""
        return Midway(f"at-{method}", seen=lambda ws: bool(self.fakes[ws].calls(method, path)),
                      arm=lambda ws: self.fakes[ws].hang_next(method, path))


def _receive_side_survives(fork: Path) -> None:
    """The bare fork stands in for GitHub, but its receive-pack runs in the killed
    client's process group and dies with it, leaving the ref lock it held
    (``refs/heads/contrib/sm120.lock``).  GitHub's receive side is not killed with
    the client and never leaves one, so a lock here is the harness's, not
    contrib's: it goes, as git itself would after a receive-pack that ended."""
    for lock in (fork / "refs").rglob("*.lock"):
        lock.unlink()
    (fork / "packed-refs.lock").unlink(missing_ok=True)


def _post_pr(fake: FakeGitHub, pr: dict[str, Any]) -> None:
    data = json.dumps({"title": pr["title"], "body": pr["body"], "head": pr["head"]["label"],
                       "base": pr["base"]["ref"], "draft": True}).encode()
    req = urllib.request.Request(f"{fake.url}/repos/{UPSTREAM}/pulls", data=data, method="POST",
                                 headers={"Authorization": f"token {PLANTED}",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as answer:
        assert answer.status == 201


def _run_trials(scene: Scene, tmp_path: Path, trials: Trials, request: tuple[str, str],
                seed: int, label: str, states: set[str]) -> None:
    args = ("open-pr", "proj/sm120")
    # The cache fetches the rebased upstream now, not in the reference run alone: each
    # trial then passes the reference's points.
    assert run(scene.root, "status", env=dict(os.environ)).returncode == 0
    reference = tmp_path / "reference"
    shutil.copytree(scene.root, reference)
    points = counted(reference, *args, env=trials.setup(reference))
    trials.expected = _user_files(reference)
    trials.tip = str(_tip(reference.parent / "reference-fork.git"))
    assert trials.tip != trials.old_tip
    trials.verify(reference, "final")
    kills = [*choose(points, seed, 7), trials.at_request(*request)]
    results = kill_trials(scene.root, tmp_path, args, kills,
                          None, {}, setup=trials.setup, verify=trials.verify)
    for fake in trials.fakes.values():
        fake.stop()
    print(tally(label, results, points))
    # The first point, the PR's request, the record's last moment before its rename
    # and the first after: each state is reached by construction.
    assert outcomes(results) == states


def test_open_pr_create_killed_anywhere(tmp_path: Path, upstream: Repo,
                                        planted_github: FakeGitHub) -> None:
    scene = Scene(tmp_path, upstream, planted_github)
    _run_trials(scene, tmp_path, Trials(scene, None, None), ("POST", PULLS), 5_20261129,
                "open-pr (create)", {"before", "pushed", "opened", "after"})


def test_open_pr_update_killed_anywhere(tmp_path: Path, upstream: Repo,
                                        planted_github: FakeGitHub) -> None:
    scene = Scene(tmp_path, upstream, planted_github)
    code, [first] = scene.run()
    assert code == 0 and first["result"] == "created"
    [old_pr] = planted_github.pulls(UPSTREAM)
    scene.rebase()
    trials = Trials(scene, first["tip"], old_pr)
    # The PR's record is unchanged by an update (its number, state and draft stay), so
    # once its body is current the files are the final ones: no "opened" state.
    _run_trials(scene, tmp_path, trials, ("PATCH", rf"{PULLS}/\d+"), 6_20261129,
                "open-pr (update)", {"before", "pushed", "after"})
