"""Twenty-four unattended autopilot runs with PRs: every version is pushed, yet each
patchset keeps a bounded working tree and every run commits all it wrote."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from testing.autopilot_scene import IDENTITY, Scene
from testing.fake_github import FakeGitHub, fake_github_fixture  # noqa: F401
from testing.gitutil import Repo, git
from testing.workspace import run_contrib

RUNS = 24


def _versions(scene: Scene, name: str) -> int:
    folder = scene.root / "patchsets" / "proj" / name
    return sum(1 for p in folder.iterdir() if p.is_dir())


@pytest.mark.slow
def test_24_runs_with_prs_keep_at_most_10_versions_per_patchset(
        tmp_path: Path, upstream: Repo, fake_github: FakeGitHub, monkeypatch: Any) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", fake_github.token)
    scene = Scene(tmp_path, upstream, fake_github, "create")
    git(upstream.path, "branch", "release-1")
    meta = scene.root / "patchsets/proj/f7/patchset.toml"
    meta.write_text('targets = ["main", "release-1"]\n' + meta.read_text())
    git(scene.root, "commit", "-qam", "f7 on two lines", env=IDENTITY)
    for run in range(RUNS):
        if run % 3 == 2:  # the release line moves now and then, main every time
            git(upstream.path, "checkout", "-q", "release-1")
            upstream.commit(f"release: fix {run}", {f"docs/fix{run}.md": f"{run}\n"})
            git(upstream.path, "checkout", "-q", "main")
        upstream.commit(f"docs: note {run}", {f"docs/note{run}.md": f"{run}\n"})
        code, doc, err = scene.run()
        assert code == 0, (run, doc, err)
        assert scene.clean(), (run, git(scene.root, "status", "--porcelain"))
    assert len(scene.prs()) == 3  # f3, f7 on main, f7 on release-1: pushed every run
    for name in ("f3", "f7"):
        assert _versions(scene, name) <= 10, (name, _versions(scene, name))
    log = run_contrib("log", "proj/f3", "--json", cwd=scene.root)
    assert log.code == 0, log.err
    assert len(json.loads(log.out)["versions"]) == RUNS + 1  # nothing out of reach


def test_the_commit_takes_a_second_targets_new_version_when_only_it_moved(
        tmp_path: Path, upstream: Repo, fake_github: FakeGitHub, monkeypatch: Any) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", fake_github.token)
    scene = Scene(tmp_path, upstream, fake_github, "never")
    git(upstream.path, "branch", "release-1")
    meta = scene.root / "patchsets/proj/f7/patchset.toml"
    meta.write_text('targets = ["main", "release-1"]\n' + meta.read_text())
    git(scene.root, "commit", "-qam", "f7 on two lines", env=IDENTITY)
    assert scene.run()[0] == 0 and scene.clean()
    git(upstream.path, "checkout", "-q", "release-1")
    new_base = upstream.commit("release: a fix", {"docs/fix.md": "fix\n"})
    git(upstream.path, "checkout", "-q", "main")
    code, doc, err = scene.run("proj/f7@release-1")
    assert code == 0, (doc, err)
    assert scene.clean(), git(scene.root, "status", "--porcelain")
    files = git(scene.root, "show", "--name-only", "--format=", "HEAD").split()
    assert f"patchsets/proj/f7/{new_base}/series" in files
