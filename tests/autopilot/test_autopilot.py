"""`contrib autopilot` end to end: a local upstream that moves, breaks a patch and
lands one; real git, a bare fork, the workspace's origin, real PyGithub against
the fake GitHub."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from contrib.autopilot.workflow import GpuRunner, Options, render
from testing.autopilot_scene import IDENTITY, UPSTREAM, WSREPO, Scene, fast_forge, patched
from testing.fake_github import FakeGitHub, Fault, fake_github_fixture  # noqa: F401
from testing.gitutil import Repo, git
from testing.workspace import run_contrib


@pytest.fixture
def scene(tmp_path: Path, upstream: Repo, fake_github: FakeGitHub,
          monkeypatch: pytest.MonkeyPatch) -> Scene:
    monkeypatch.setenv("GITHUB_TOKEN", fake_github.token)
    return Scene(tmp_path, upstream, fake_github, prs="create")


def actions(doc: dict[str, Any], target: str, step: str) -> list[str]:
    (entry,) = [p for p in doc["patchsets"] if p["patchset"] == target]
    return [a["result"] for a in entry["actions"] if a["step"] == step]


def audit(scene: Scene, *texts: str) -> None:
    """The token is nowhere: output, workspace files, commits, issues, PRs, comments."""
    token = scene.fake.token
    for text in texts:
        assert token not in text
    for path in scene.root.rglob("*"):
        if path.is_file():
            assert token.encode() not in path.read_bytes(), path
    assert token not in git(scene.root, "log", "-p", "--all")
    for issue in scene.fake.issues(WSREPO):
        assert token not in str(issue)
    for pr in scene.prs():
        assert token not in str(pr)
        assert token not in str(scene.fake.comments(UPSTREAM, pr["number"]))


def test_the_whole_story(scene: Scene) -> None:
    # Run 1: validate both, open a draft PR each, one dashboard, one commit, pushed.
    code, doc, err = scene.run()
    assert code == 0, doc
    assert len(scene.prs()) == 2
    assert all(p["draft"] and p["state"] == "open" for p in scene.prs())
    assert actions(doc, "proj/f3", "pr") == ["created"]
    assert len(scene.dashboards()) == 1 and doc["dashboard"]["result"] == "created"
    body = scene.dashboard()
    assert "`proj/f3`" in body and "`proj/f7`" in body and "sm_120a" in body
    assert "Nothing: every patchset" in body
    assert scene.pushed() == scene.head() and scene.clean()
    message = git(scene.root, "log", "-1", "--format=%B")
    assert "- proj/f3: " in message and "- proj/f7: " in message
    numbers = sorted(p["number"] for p in scene.prs())
    issue = scene.dashboards()[0]["number"]

    # Upstream moves: run 2 rebases, updates the same PRs and the same dashboard.
    scene.upstream.commit("docs: more", {"docs/more.md": "more\n"})
    seen = len(scene.fake.requests)
    code, doc, err = scene.run()
    assert code == 0, doc
    assert actions(doc, "proj/f3", "sync") == ["rebased"]
    assert actions(doc, "proj/f3", "pr") == ["updated"]
    assert sorted(p["number"] for p in scene.prs()) == numbers
    assert [i["number"] for i in scene.dashboards()] == [issue]
    assert any(w.startswith("PATCH /repos/me/ws/issues/") for w in scene.writes(seen))
    assert not any(w.startswith("POST") for w in scene.writes(seen) if "pulls" in w)
    assert scene.pushed() == scene.head() and scene.clean()

    # Run 3, nothing moved: no write to GitHub at all, no commit.
    head, seen = scene.head(), len(scene.fake.requests)
    code, doc, err = scene.run()
    assert code == 0, doc
    assert scene.writes(seen) == []
    assert doc["dashboard"]["result"] == "unchanged"
    assert scene.head() == head and doc["commit"] is None
    human = run_contrib("autopilot", "--dry-run", cwd=scene.root)  # the CLI, human output
    assert human.code == 0, human.err
    assert "would:" not in human.out and "proj/f3" in human.out
    audit(scene, err, json.dumps(doc), human.out, human.err)


def test_conflict_is_reported_and_cleared_after_continue(scene: Scene) -> None:
    assert scene.run()[0] == 0
    breaking = scene.upstream.commit("core: f3 returns 3 + 0 (#4242)", {
        "pkg/core.py": patched("    return 3\n", "    return 3 + 0\n")})
    code, doc, err = scene.run()
    assert code == 1
    assert actions(doc, "proj/f3", "sync") == ["conflict"]
    assert actions(doc, "proj/f7", "sync") == ["rebased"]  # the other one moves on
    body = scene.dashboard()
    assert f"https://github.com/{UPSTREAM}/commit/{breaking}" in body
    assert "core: f3 returns 3 + 0 (#4242)" in body
    assert "contrib sync --continue --commit proj/f3" in body and "`pkg/core.py`" in body
    assert ".contrib/conflicts/" in body
    (need,) = [n for p in doc["patchsets"] for n in p["needs"]]
    assert need["kind"] == "conflict" and need["commit"]["sha"] == breaking
    # A second run while it waits: still reported, nothing new written.
    seen, head = len(scene.fake.requests), scene.head()
    assert scene.run()[0] == 1 and scene.writes(seen) == []
    # A fresh CI runner has no conflict worktree: the recorded conflict is reported
    # as it is, without a new commit or a dashboard write.
    saved = scene.root.parent / "saved-state"
    (scene.root / ".contrib").rename(saved)
    code, doc, err = scene.run()
    assert code == 1 and scene.writes(seen) == [] and scene.head() == head
    assert actions(doc, "proj/f3", "sync") == ["conflict"]
    shutil.rmtree(scene.root / ".contrib")
    saved.rename(scene.root / ".contrib")
    # The maintainer resolves it; the next run clears the dashboard.
    worktree = scene.root / need["worktree"]
    resolved = patched("    return 3\n", "    return 33 + 0\n")
    (worktree / "pkg/core.py").write_text(resolved)
    done = run_contrib("sync", "--continue", "proj/f3", cwd=scene.root)
    assert done.code == 0, done.err
    code, doc, err = scene.run()
    assert code == 0, doc
    body = scene.dashboard()
    assert "Nothing: every patchset" in body and "conflict" not in body.split("## Needs")[1]
    assert actions(doc, "proj/f3", "pr") == ["updated"]
    assert scene.clean() and scene.pushed() == scene.head()


def test_upstreamed_patchset_gets_exactly_one_comment(scene: Scene) -> None:
    assert scene.run()[0] == 0
    (f7,) = [p for p in scene.prs() if p["head"]["ref"] == "contrib/f7"]
    landing = scene.upstream.commit("core: f7 returns 77 (#77)", {
        "pkg/core.py": patched("    return 7\n", "    return 77\n")})
    code, doc, err = scene.run()
    assert code == 0, doc
    assert actions(doc, "proj/f7", "sync") == ["upstreamed"]
    assert actions(doc, "proj/f7", "comment") == ["commented"]
    comments = scene.fake.comments(UPSTREAM, f7["number"])
    assert len(comments) == 1
    assert landing[:12] in comments[0]["body"] and "core: f7 returns 77 (#77)" in \
        comments[0]["body"] and "(#77)" in comments[0]["body"]
    assert f"https://github.com/{UPSTREAM}/commit/{landing}" in scene.dashboard()
    code, doc, err = scene.run()
    assert code == 0
    assert actions(doc, "proj/f7", "comment") == ["already there"]
    assert len(scene.fake.comments(UPSTREAM, f7["number"])) == 1


def test_dashboard_create_lost_to_a_502_is_found_not_duplicated(scene: Scene) -> None:
    scene.fake.add_fault(Fault("POST", rf"/repos/{WSREPO}/issues", "after", count=1,
                               status=502))
    code, doc, err = scene.run()
    assert code == 0, doc
    assert len(scene.dashboards()) == 1
    assert len(scene.fake.issues(WSREPO)) == 1


def test_closed_dashboard_is_reopened_and_a_closed_pr_needs_a_person(scene: Scene) -> None:
    assert scene.run()[0] == 0
    (issue,) = scene.dashboards()
    fast_forge(scene.fake.url, scene.fake.token).edit_issue(WSREPO, issue["number"],
                                                            state="closed")  # a human closes it
    (f3,) = [p for p in scene.prs() if p["head"]["ref"] == "contrib/f3"]
    scene.fake.close_pr(UPSTREAM, f3["number"])
    code, doc, err = scene.run()
    assert code == 1
    assert doc["dashboard"]["result"] == "reopened"
    assert [i["state"] for i in scene.dashboards()] == ["open"]
    assert actions(doc, "proj/f3", "pr") == ["closed"]
    assert f"PR #{f3['number']}" in scene.dashboard() and "closed by a human" in \
        scene.dashboard()
    assert [p["state"] for p in scene.prs() if p["number"] == f3["number"]] == ["closed"]


def test_policy_update_never_creates_and_never_policy_leaves_prs(
        tmp_path: Path, upstream: Repo, fake_github: FakeGitHub,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", fake_github.token)
    scene = Scene(tmp_path, upstream, fake_github, prs="update")
    code, doc, err = scene.run()
    assert code == 0, doc
    assert scene.prs() == [] and actions(doc, "proj/f3", "pr") == ["none"]
    assert len(scene.dashboards()) == 1


def test_dry_run_writes_nothing_anywhere(scene: Scene) -> None:
    scene.upstream.commit("docs: more", {"docs/more.md": "more\n"})
    before = {p: p.read_bytes() for p in scene.root.rglob("*") if p.is_file()
              and ".git" not in p.parts}
    head, fork = scene.head(), git(scene.fork, "for-each-ref")
    code, doc, err = scene.run(dry_run=True, push=True)
    assert code == 0, doc
    assert scene.writes() == [] and scene.fake.issues(WSREPO) == []
    assert actions(doc, "proj/f3", "sync") == ["rebased"]
    assert actions(doc, "proj/f3", "pr") == ["would create"]
    assert doc["dashboard"]["result"] == "created" and doc["dry_run"] is True
    assert doc["push"] == "would push" and doc["commit"] is None
    assert any(f.endswith("/patchset.toml") for f in doc["would_commit"])
    assert any(w.startswith(f"POST /repos/{WSREPO}/issues") for w in doc["would_write"])
    assert any(w.startswith(f"POST /repos/{UPSTREAM}/pulls") for w in doc["would_write"])
    after = {p: p.read_bytes() for p in scene.root.rglob("*") if p.is_file()
             and ".git" not in p.parts and ".contrib" not in p.parts}
    assert after == {p: b for p, b in before.items() if ".contrib" not in p.parts}
    assert scene.head() == head and git(scene.fork, "for-each-ref") == fork
    assert scene.pushed() == head


def test_gpu_leg_without_runner_is_on_the_dashboard(scene: Scene) -> None:
    code, doc, err = scene.run(gpu_missing=("sm_120",))
    assert code == 1
    assert "GPU leg sm_120: no runner picked it up" in scene.dashboard()
    assert "[self-hosted, linux, gpu, sm_120]" in scene.dashboard()


def test_ci_checks_and_the_run_url_are_shown(scene: Scene,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    assert scene.run()[0] == 0
    (f3,) = [p for p in scene.prs() if p["head"]["ref"] == "contrib/f3"]
    scene.fake.add_check_run(UPSTREAM, f3["head"]["sha"], "build", conclusion="success")
    scene.fake.add_check_run(UPSTREAM, f3["head"]["sha"], "gpu", conclusion="failure")
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.com")
    monkeypatch.setenv("GITHUB_REPOSITORY", WSREPO)
    monkeypatch.setenv("GITHUB_RUN_ID", "4242")
    code, doc, err = scene.run()
    body = scene.dashboard()
    assert "CI: 1/2 passed, 1 failed" in body
    assert f"https://github.com/{WSREPO}/actions/runs/4242" in body
    assert actions(doc, "proj/f3", "pr") == ["unchanged"] and code == 0


def test_bad_config_is_exit_2(scene: Scene) -> None:
    config = scene.root / "contrib.toml"
    config.write_text(config.read_text().replace('prs = "create"', 'prs = "sometimes"'))
    done = run_contrib("autopilot", cwd=scene.root)
    assert done.code == 2 and "contrib.toml:" in done.err and "prs must be one of" in done.err
    config.write_text(config.read_text().replace('prs = "sometimes"', 'colour = "red"'))
    done = run_contrib("autopilot", cwd=scene.root)
    assert done.code == 2 and "unknown key 'colour' in [autopilot]" in done.err


def test_pr_waits_for_a_required_stage_the_gpu_legs_bring(scene: Scene) -> None:
    meta = scene.root / "patchsets/proj/f3/patchset.toml"
    meta.write_text(meta.read_text() + '\n[validation]\nrequire = ["apply", "tests"]\n')
    git(scene.root, "commit", "-qam", "f3 needs its tests", env={
        "GIT_AUTHOR_NAME": "M", "GIT_AUTHOR_EMAIL": "m@e", "GIT_COMMITTER_NAME": "M",
        "GIT_COMMITTER_EMAIL": "m@e"})
    code, doc, err = scene.run()
    assert code == 0, doc  # waiting for the GPU legs is not a person's job
    assert actions(doc, "proj/f3", "pr") == ["waiting"]
    assert actions(doc, "proj/f7", "pr") == ["created"]
    assert [p["head"]["ref"] for p in scene.prs()] == ["contrib/f7"]
    assert "none (waiting: " in scene.dashboard() and "tests" in scene.dashboard()


def _push_from_another_clone(scene: Scene, edit: dict[str, str]) -> str:
    """A maintainer pushes to the workspace's origin meanwhile; the sha they pushed."""
    other = scene.tmp / "other"
    git(scene.tmp, "clone", "-q", "-b", "main", str(scene.origin), str(other))
    for rel, text in edit.items():
        (other / rel).write_text(text)
    git(other, "add", "-A")
    git(other, "commit", "-qm", "a maintainer's change", env=IDENTITY)
    git(other, "push", "-q", "origin", "main")
    return git(other, "rev-parse", "HEAD")


def test_a_push_race_is_rebased_never_forced(scene: Scene) -> None:
    assert scene.run()[0] == 0
    theirs = _push_from_another_clone(scene, {"NOTES.md": "maintainer notes\n"})
    scene.upstream.commit("docs: more", {"docs/more.md": "more\n"})
    code, doc, err = scene.run()
    assert code == 0, doc
    assert doc["push"] == "rebased and pushed"
    assert scene.pushed() == scene.head()
    git(scene.origin, "merge-base", "--is-ancestor", theirs, "main")  # kept, not forced
    assert (scene.root / "NOTES.md").read_text() == "maintainer notes\n"


def test_a_push_race_that_does_not_rebase_is_reported(scene: Scene) -> None:
    assert scene.run()[0] == 0
    meta = "patchsets/proj/f3/patchset.toml"
    text = (scene.root / meta).read_text()
    theirs = _push_from_another_clone(scene, {meta: text.replace(
        'title = "', 'title = "[maintainer] ', 1) + "\n# edited\n"})
    scene.upstream.commit("docs: more", {"docs/more.md": "more\n"})
    code, doc, err = scene.run()
    assert code == 1
    assert doc["push"] == "failed"
    (problem,) = doc["problems"]
    assert "does not rebase" in problem["text"] and "nothing was pushed" in problem["text"]
    assert scene.pushed() == theirs  # their commit stays; nothing forced
    assert not (scene.root / ".git" / "rebase-merge").exists()
    assert git(scene.root, "status", "--porcelain") == ""


def test_failed_validation_names_its_findings_and_opens_no_pr(scene: Scene) -> None:
    scene.new("bad", "core: f5 returns a syntax error", patched(
        "    return 5\n", "    return 5 +\n"))
    git(scene.root, "add", "-A")
    git(scene.root, "commit", "-qm", "a broken patchset", env=IDENTITY)
    code, doc, err = scene.run()
    assert code == 1
    (need,) = [n for p in doc["patchsets"] for n in p["needs"]]
    assert need["kind"] == "validation" and need["patchset"] == "proj/bad"
    assert any("pkg/core.py" in f["text"] and "syntax" in f["text"] for f in need["findings"])
    assert actions(doc, "proj/bad", "pr") == ["not updated"]
    assert sorted(p["head"]["ref"] for p in scene.prs()) == ["contrib/f3", "contrib/f7"]
    needs = scene.dashboard().split("## Needs you")[1]
    assert "**validation**: proj/bad" in needs and "pkg/core.py" in needs
    # A run for one target keeps the others' entries on the dashboard.
    code, doc, err = scene.run("proj/f3")
    assert code == 0 and [p["patchset"] for p in doc["patchsets"]] == ["proj/f3"]
    assert scene.dashboard().split("## Needs you")[1] == needs


def test_a_fork_branch_someone_else_pushed_to_needs_a_person(scene: Scene) -> None:
    assert scene.run()[0] == 0
    tip = git(scene.fork, "rev-parse", "refs/heads/contrib/f3")
    tree = git(scene.fork, "rev-parse", f"{tip}^{{tree}}")
    foreign = git(scene.fork, "commit-tree", tree, "-p", tip, "-m", "a colleague's fixup",
                  env=IDENTITY)
    git(scene.fork, "update-ref", "refs/heads/contrib/f3", foreign)
    scene.upstream.commit("docs: more", {"docs/more.md": "more\n"})
    code, doc, err = scene.run()
    assert code == 1
    (need,) = [n for p in doc["patchsets"] for n in p["needs"]]
    assert need["patchset"] == "proj/f3" and "contrib never pushed" in need["text"]
    assert git(scene.fork, "rev-parse", "refs/heads/contrib/f3") == foreign  # untouched
    assert actions(doc, "proj/f7", "pr") == ["updated"]


def _step(workflow: dict[str, Any], job: str, needle: str) -> str:
    return next(s["run"] for s in workflow["jobs"][job]["steps"] if needle in s.get("run", ""))


def test_the_workflows_gpu_and_merge_scripts_run_for_real(scene: Scene, tmp_path: Path) -> None:
    """The generated shell, run by bash in the workspace as the runners would: one GPU
    leg writes a run file per patchset of its arch; the merge job merges them, names
    the leg that never ran, commits, pushes and updates the dashboard."""
    assert scene.run()[0] == 0
    workflow = yaml.safe_load(render(Options(gpu=[GpuRunner("sm_120", "sm_120a"),
                                                  GpuRunner("h100", "sm_90a")])))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "contrib"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m contrib "$@"\n')
    shim.chmod(0o755)
    path = f"{bin_dir}:{os.environ['PATH']}"
    gpu_temp, merge_temp = tmp_path / "gpu-runner", tmp_path / "merge-runner"
    leg = subprocess.run(["bash", "-e", "-c", _step(workflow, "gpu", "contrib validate")],
                         cwd=scene.root, capture_output=True, text=True, check=False,
                         env={**os.environ, "PATH": path, "RUNNER_TEMP": str(gpu_temp),
                              "ARCH": "sm_120a", "LABEL": "sm_120"})
    assert leg.returncode == 0, leg.stderr
    made = sorted(p.name for p in (gpu_temp / "contrib-validation").iterdir())
    assert made == ["sm_120--proj--f3.json", "sm_120--proj--f7.json", "sm_120.done"]
    assert scene.clean()  # the leg wrote nothing into the workspace
    shutil.copytree(gpu_temp / "contrib-validation", merge_temp / "gpu-results")  # artifacts
    merge = subprocess.run(["bash", "-e", "-c", _step(workflow, "merge", "--merge")],
                           cwd=scene.root, capture_output=True, text=True, check=False,
                           env={**os.environ, "PATH": path, "RUNNER_TEMP": str(merge_temp)})
    assert merge.returncode == 1, merge.stderr  # the h100 leg never ran: needs a person
    body = scene.dashboard()
    assert "GPU leg h100: no runner" in body and "GPU leg sm_120" not in body
    assert scene.clean() and scene.pushed() == scene.head()
    assert "validation.json" in git(scene.root, "show", "--stat", "HEAD")
    record = json.loads((scene.ws.patchset("proj/f3").current.validation_path).read_text())
    assert len(record["runs"]) == 2 and record["schema"] == 2  # this one and the leg's
