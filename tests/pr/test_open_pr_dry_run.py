"""`contrib open-pr --dry-run` is the recording forge: what it prints is what a real run
would ask of GitHub, and no write reaches GitHub, the fork or the workspace."""

from __future__ import annotations

from pathlib import Path

import pytest

from contrib.forge.recording import RecordingForge
from contrib.pr.open import open_pr
from testing.fake_github import FakeGitHub, fake_github_fixture  # noqa: F401
from testing.gitutil import Repo
from testing.pr_scene import HEAD, TARGET, UPSTREAM, Scene, fast_github
from testing.workspace import run_contrib


@pytest.fixture
def scene(tmp_path: Path, upstream: Repo, fake_github: FakeGitHub,
          monkeypatch: pytest.MonkeyPatch) -> Scene:
    monkeypatch.setenv("GITHUB_TOKEN", fake_github.token)
    return Scene(tmp_path, upstream, fake_github)


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".contrib" not in p.parts}


def test_dry_run_calls_are_the_real_runs_calls(scene: Scene) -> None:
    """The dry run lists the writes the real run then makes, one for one."""
    before = _tree(scene.root)
    res = run_contrib("open-pr", "--dry-run", "--json", TARGET, cwd=scene.root)
    assert res.code == 0, res.err
    [dry] = res.json["results"]  # type: ignore[index]
    assert scene.fake.writes() == [] and scene.fork_tip() is None
    assert _tree(scene.root) == before
    assert (dry["result"], dry["would"], dry["push"]) == ("dry-run", "created", "would push")
    forge_calls = [a for a in dry["actions"] if a.split()[0] in ("GET", "POST", "PATCH")]
    assert forge_calls == [f"GET /repos/{UPSTREAM}/pulls state=all head={HEAD} base=main",
                           f"POST /repos/{UPSTREAM}/pulls head={HEAD} draft=true"]
    code, [real] = scene.run()
    assert code == 0 and real["result"] == "created"
    assert [(r.method, r.path) for r in scene.fake.writes()] == [("POST", f"/repos/{UPSTREAM}/pulls")]


def test_dry_run_of_an_update_shows_the_patch(scene: Scene) -> None:
    code, _ = scene.run()
    assert code == 0
    scene.rebase()
    writes = len(scene.fake.writes())
    res = run_contrib("open-pr", "--dry-run", TARGET, cwd=scene.root)
    assert res.code == 0, res.err
    assert f"PATCH /repos/{UPSTREAM}/pulls/1 title, body" in res.out
    assert "git push --force-with-lease=refs/heads/contrib/sm120:" in res.out
    assert len(scene.fake.writes()) == writes  # nothing reached GitHub
    [pr] = scene.prs()
    assert "git range-diff" not in pr["body"]  # the body still says what the first run wrote


def test_dry_run_of_a_closed_pr_with_reopen(scene: Scene) -> None:
    code, _ = scene.run()
    assert code == 0
    scene.fake.close_pr(UPSTREAM, 1)
    res = run_contrib("open-pr", "--dry-run", "--reopen", "--json", TARGET, cwd=scene.root)
    assert res.code == 0, res.err
    [dry] = res.json["results"]  # type: ignore[index]
    assert dry["would"] == "reopened"
    assert f"PATCH /repos/{UPSTREAM}/pulls/1 state=open" in dry["actions"]
    assert scene.fake.pulls(UPSTREAM)[0]["state"] == "closed" and len(scene.fake.writes()) == 1


def test_a_callers_recorder_collects_the_calls(scene: Scene) -> None:
    """What a command that dry-runs several steps (the autopilot) hands open-pr."""
    recorder = RecordingForge(fast_github(scene.fake.url, scene.fake.token))
    seen: list[str] = []
    recorder.on_call = lambda call: seen.append(str(call))
    ws = scene.ws
    with ws.lock():
        code, [res] = open_pr(ws, [TARGET], dry_run=True, forge=recorder)
    assert code == 0 and res["would"] == "created"
    assert [str(c) for c in recorder.writes] == [f"POST /repos/{UPSTREAM}/pulls head={HEAD} draft=true"]
    assert seen == [str(c) for c in recorder.calls] and recorder.on_call is not None
    assert all(line in res["actions"] for line in seen)
    assert scene.fake.writes() == [] and scene.fork_tip() is None
