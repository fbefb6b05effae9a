"""`contrib status` shows each PR's state, CI checks and review decision, read from GitHub."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contrib.pr.status import pr_cells
from testing.fake_github import FakeGitHub, fake_github_fixture  # noqa: F401
from testing.gitutil import Repo
from testing.pr_scene import UPSTREAM, Scene
from testing.workspace import run_contrib


@pytest.fixture
def scene(tmp_path: Path, upstream: Repo, fake_github: FakeGitHub,
          monkeypatch: pytest.MonkeyPatch) -> Scene:
    monkeypatch.setenv("GITHUB_TOKEN", fake_github.token)
    made = Scene(tmp_path, upstream, fake_github)
    code, _ = made.run()
    assert code == 0
    return made


def _status(scene: Scene, *args: str) -> tuple[int, dict[str, Any], str]:
    res = run_contrib("status", "--json", *args, cwd=scene.root)
    assert res.json is not None, res.err
    return res.code, res.json, res.err


def test_checks_and_review_next_to_the_pr(scene: Scene) -> None:
    [pr] = scene.prs()
    sha = pr["head"]["sha"]
    scene.fake.add_check_run(UPSTREAM, sha, "build", conclusion="success")
    scene.fake.add_check_run(UPSTREAM, sha, "gpu sm_120", conclusion="failure")
    scene.fake.set_status(UPSTREAM, sha, "ci/docs", "pending")
    scene.fake.add_review(UPSTREAM, pr["number"], "maintainer", "CHANGES_REQUESTED")
    writes = len(scene.fake.writes())
    code, doc, _ = _status(scene)
    assert code == 0
    assert doc["github"] == {"api_url": scene.fake.url, "read": True, "why": None}
    [row] = doc["patchsets"]
    assert row["pr"]["number"] == pr["number"]
    assert row["pr_live"] == {
        "state": "open", "draft": True, "review": "changes_requested",
        "checks": {"total": 3, "passed": 1, "failed": 1, "pending": 1, "state": "failure"}}
    assert pr_cells(row) == (f"#{pr['number']} open draft", "1/3 passed, 1 failed, 1 pending",
                             "changes requested")
    human = run_contrib("status", cwd=scene.root)
    assert human.code == 0  # rich may fold the cells over lines: look for their words
    assert all(word in human.out for word in ("CI", "review", "draft", "passed", "requested"))
    assert len(scene.fake.writes()) == writes  # status only reads


def test_a_pr_closed_on_github_shows_closed(scene: Scene) -> None:
    [pr] = scene.prs()
    scene.fake.close_pr(UPSTREAM, pr["number"])
    _, doc, _ = _status(scene)
    live = doc["patchsets"][0]["pr_live"]
    assert (live["state"], live["checks"], live["review"]) == ("closed", None, None)
    assert doc["patchsets"][0]["pr"]["state"] == "open"  # what patchset.toml still records


def test_without_token_or_offline_only_the_records(scene: Scene,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    before = len(scene.fake.requests)
    code, doc, _ = _status(scene, "--no-fetch")
    assert code == 0 and doc["github"]["why"] == "not read: --no-fetch"
    monkeypatch.delenv("GITHUB_TOKEN")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no gh to ask either
    code, doc, _ = _status(scene)
    assert code == 0 and doc["github"]["read"] is False
    assert doc["github"]["why"].startswith("not read: no GitHub token")
    [row] = doc["patchsets"]
    assert row["pr_live"] is None and row["pr"]["state"] == "open"
    assert len(scene.fake.requests) == before


def test_github_failing_marks_the_row_and_exits_1(scene: Scene) -> None:
    scene.fake.answer_raw("GET", rf"/repos/{UPSTREAM}/pulls/\d+", b"<html>proxy login</html>",
                          count=10)
    code, doc, err = _status(scene)
    assert code == 1
    error = doc["patchsets"][0]["pr_live"]["error"]
    assert error.startswith(f"GitHub's answer to GET /repos/{UPSTREAM}/pulls/1 is not usable: "
                            "the answer is an HTML page")
    assert error in err and "Traceback" not in err
    human = run_contrib("status", cwd=scene.root)
    assert human.code == 1 and "GitHub" in human.out  # the PR cell: "#1 open (GitHub: ?)"
