"""`contrib open-pr` end to end: real git, a real bare fork, real PyGithub, the fake GitHub."""

from __future__ import annotations

import base64
import functools
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contrib.commands.open_pr import open_pr_command
from contrib.pr.body import BodyInput, CommitLine, render_body
from contrib.record import Record, Standing, arch_verdicts, record_json
from contrib.secrets import register_secret
from contrib.ui import UI
from contrib.validate.report import StageResult, Validation
from contrib.workspace.validation import Settings
from testing.fake_github import FakeGitHost, FakeGitHub, fake_github_fixture  # noqa: F401
from testing.gitutil import Repo, git
from testing.pr_scene import FORK, HEAD, PASSED, TARGET, UPSTREAM, Scene, fast_github
from testing.recordutil import bound_record, run_of
from testing.workspace import run_contrib


@pytest.fixture
def scene(tmp_path: Path, upstream: Repo, fake_github: FakeGitHub,
          monkeypatch: pytest.MonkeyPatch) -> Scene:
    monkeypatch.setenv("GITHUB_TOKEN", fake_github.token)
    return Scene(tmp_path, upstream, fake_github)


@pytest.fixture
def githost(tmp_path: Path, fake_github: FakeGitHub,
            monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHost]:
    """github.com's git side on 127.0.0.1, accepting only the fake's token."""
    monkeypatch.setenv("GIT_ALLOW_PROTOCOL", "file:http")
    host = FakeGitHost(str(tmp_path / "githost"), fake_github.token)
    yield host
    host.stop()


@pytest.fixture
def http_scene(tmp_path: Path, upstream: Repo, fake_github: FakeGitHub, githost: FakeGitHost,
               monkeypatch: pytest.MonkeyPatch) -> Scene:
    monkeypatch.setenv("GITHUB_TOKEN", fake_github.token)
    return Scene(tmp_path, upstream, fake_github, githost)


def test_creates_one_draft_pr_from_the_fork(scene: Scene) -> None:
    code, [res] = scene.run()
    assert code == 0, res
    assert (res["result"], res["push"]) == ("created", "pushed")
    [pr] = scene.prs()
    assert (pr["number"], pr["draft"], pr["state"]) == (1, True, "open")
    assert pr["head"]["label"] == HEAD and pr["base"]["ref"] == "main"
    assert pr["title"] == "Admit SM120 in f3"
    # The branch is the patch as a commit on the recorded base, authored as in the patch.
    base = scene.version_dir().name
    assert scene.fork_tip() == res["tip"] == pr["head"]["sha"]
    assert git(scene.fork, "rev-parse", f"{res['tip']}^") == base
    assert git(scene.fork, "log", "-1", "--format=%an|%s", res["tip"]) == \
        "Upstream Dev|Admit SM120 in f3"
    assert git(scene.fork, "for-each-ref", "--format=%(refname)") == "refs/heads/contrib/sm120"
    body = pr["body"]
    assert "Widen the gate to sm_120." in body
    assert f"<!-- contrib:patchset={TARGET} version={base} -->" in body
    assert body.startswith("**Validation:** sm_120a: passed (1 finding waived).\n"), body
    assert res["validation"] == "sm_120a: passed (1 finding waived)"
    assert "**sm_120a** (target run, compute_120a) on gpu-box-7, 2x NVIDIA RTX PRO " \
        "6000 Blackwell (sm 12.0), nvcc 13.0, finished 2026-11-30T10:00:00+00:00:" in body
    assert "| ptx | not-applicable | no CUDA translation unit to compile |" in body
    assert "| tests | passed | 3 passed; tests passed: 3; tests: `tests/test_core.py` |" in body
    assert "`csrc/ar.cuh:41` PDL sync compiled out — waived: sm_120 has no PDL" in body
    # what was proven: a GPU of the target ran the tests; no [decisions], no chain
    assert "### What was proven\n\nFor sm_120a, `contrib validate` passed:\n\n" \
           "- apply: applies without fuzz\n" in body
    assert "A GPU of the target (sm_120a) ran this patch." in body
    assert "Not proven here" not in body and "### The chain" not in body
    meta = scene.meta()
    assert meta["pr"]["number"] == 1 and meta["pr"]["state"] == "open"
    assert meta["pr"]["url"] == "https://github.com/upstream-org/proj/pull/1"
    assert meta["pr"]["pushed"] == res["tip"] and meta["pr"]["version"] == base
    assert meta["upstream_status"] == "Submitted"
    post = scene.fake.calls("POST", f"/repos/{UPSTREAM}/pulls")[0].json()
    assert post["draft"] is True and post["maintainer_can_modify"] is True


def test_second_run_changes_nothing_and_never_duplicates(scene: Scene) -> None:
    _, [first] = scene.run()
    before = len(scene.fake.requests)
    code, [again] = scene.run()
    assert code == 0 and (again["result"], again["push"]) == ("unchanged", "unchanged")
    assert again["tip"] == first["tip"]  # same input, same SHAs
    new_calls = scene.fake.requests[before:]
    assert [c.method for c in new_calls] == ["GET", "GET"]  # repo + PR lookup, no writes
    assert len(scene.prs()) == 1


def test_rebase_updates_the_same_pr_with_range_diff(scene: Scene) -> None:
    _, [first] = scene.run()
    new_base = scene.rebase()
    code, [res] = scene.run()
    assert code == 0, res
    assert (res["result"], res["push"]) == ("updated", "pushed")
    assert any(a.startswith(f"git push --force-with-lease=refs/heads/contrib/sm120:{first['tip']} ")
               for a in res["actions"])
    [pr] = scene.prs()
    assert scene.fork_tip() == res["tip"] != first["tip"]
    assert git(scene.fork, "rev-parse", f"{res['tip']}^") == new_base
    assert f"version={new_base} -->" in pr["body"]
    old_base = git(scene.fork, "rev-parse", f"{first['tip']}^")
    assert f"(version {old_base[:12]} -> {new_base[:12]})" in pr["body"]
    assert f"1:  {first['tip'][:7]} = 1:  {res['tip'][:7]} Admit SM120 in f3" in pr["body"]
    assert len(scene.fake.calls("POST")) == 1 and len(scene.fake.calls("PATCH")) == 1
    meta = scene.meta()["pr"]
    assert meta["previous"] == first["tip"] and meta["pushed_history"] == [first["tip"], res["tip"]]
    # and once more: the body (with its range-diff) is stable, so nothing is written
    code, [again] = scene.run()
    assert again["result"] == "unchanged" and len(scene.fake.calls("PATCH")) == 1


def test_lost_502_after_create_still_one_pr(scene: Scene) -> None:
    scene.fake.fail_after_create()
    code, [res] = scene.run()
    assert code == 0, res
    assert len(scene.prs()) == 1 and scene.meta()["pr"]["number"] == 1
    assert len(scene.fake.calls("POST")) == 2  # GithubRetry retried; GitHub said "already exists"
    assert res["result"] == "created" and scene.fake.calls("PATCH") == []


def test_lost_502_without_retries_finds_the_pr(scene: Scene) -> None:
    scene.fake.fail_after_create()
    factory = functools.partial(fast_github, retries=0)
    code, [res] = scene.run(github_factory=factory)
    assert code == 0 and res["result"] == "created"
    assert len(scene.prs()) == 1 and len(scene.fake.calls("POST")) == 1
    assert scene.meta()["pr"]["number"] == 1


def test_secondary_rate_limit_is_waited_out(scene: Scene) -> None:
    fault = scene.fake.rate_limit_next("POST", f"/repos/{UPSTREAM}/pulls", retry_after=1)
    code, [res] = scene.run()
    assert code == 0 and res["result"] == "created" and fault.count == 0
    assert len(scene.prs()) == 1 and len(scene.fake.calls("POST")) == 2


def test_bad_token_is_one_line_and_exit_1(scene: Scene, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_notTheRightToken123")
    code, [res] = scene.run()
    assert code == 1
    assert res["error"] == ("GitHub rejected the token (401 Bad credentials): "
                            "set GITHUB_TOKEN to a valid token")
    assert scene.fork_tip() is None and scene.prs() == []


def test_cli_without_token_says_what_to_set(scene: Scene, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_TOKEN")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # and no gh
    res = run_contrib("open-pr", TARGET, cwd=scene.root)
    assert res.code == 1
    assert "no GitHub token for 127.0.0.1: set GITHUB_TOKEN" in res.err
    assert scene.fake.requests == []


def test_pr_closed_by_a_human_is_left_closed(scene: Scene) -> None:
    _, [first] = scene.run()
    scene.fake.close_pr(UPSTREAM, 1)
    scene.rebase()
    code, [res] = scene.run()
    assert code == 1 and res["result"] == "closed"
    assert "closed without merging" in res["error"] and "--reopen" in res["error"]
    assert scene.prs()[0]["state"] == "closed" and scene.fake.calls("PATCH") == []
    assert scene.fork_tip() == first["tip"]  # nothing pushed
    assert scene.meta()["pr"]["state"] == "closed"
    code, [res] = scene.run(reopen=True)
    assert code == 0 and res["result"] == "reopened"
    [pr] = scene.prs()
    assert pr["state"] == "open" and scene.fork_tip() == res["tip"] != first["tip"]
    assert f"version={scene.version_dir().name}" in pr["body"]


def test_merged_pr_marks_the_patchset_accepted(scene: Scene) -> None:
    scene.run()
    scene.fake.merge_pr(UPSTREAM, 1, merge_commit_sha="c0ffee" * 6 + "beef")
    code, [res] = scene.run()
    assert code == 0 and res["result"] == "merged"
    meta = scene.meta()
    assert meta["upstream_status"] == "Accepted"
    assert meta["pr"]["state"] == "merged"
    assert meta["pr"]["merge_commit_sha"] == "c0ffee" * 6 + "beef"
    assert meta["pr"]["merged_at"].endswith("Z")
    assert len(scene.fake.calls("PATCH")) == 0 and len(scene.prs()) == 1


def test_dry_run_pushes_and_posts_nothing(scene: Scene, capsys: pytest.CaptureFixture[str]) -> None:
    meta_before = (scene.version_dir().parent / "patchset.toml").read_bytes()
    ws = scene.ws
    with ws.lock():
        code = open_pr_command(ws, UI(), [TARGET], dry_run=True, force=False, reopen=False,
                               github_factory=fast_github)
    out = capsys.readouterr().out
    assert code == 0
    assert scene.fork_tip() is None and scene.prs() == []
    assert scene.fake.requests == []  # offline: not even a lookup
    assert "not checked (a dry run is offline" in out
    assert (scene.version_dir().parent / "patchset.toml").read_bytes() == meta_before
    assert "contrib/sm120" in out and "title: Admit SM120 in f3" in out
    assert "git push --force-with-lease=refs/heads/contrib/sm120:" in out
    assert f"POST /repos/{UPSTREAM}/pulls head={HEAD} draft=true" in out
    assert "<!-- contrib:patchset=proj/sm120" in out and "commit " in out


def test_dry_run_needs_no_token(scene: Scene, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_TOKEN")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    res = run_contrib("open-pr", "--dry-run", "--json", TARGET, cwd=scene.root)
    assert res.code == 0, res.err
    [r] = res.json["results"]  # type: ignore[index]
    assert r["result"] == "dry-run" and r["push"] == "would push"
    assert "no GitHub token here" in r["unchecked"][-1]
    assert scene.fake.requests == [] and scene.fork_tip() is None


SKIPPED_PTX = run_of([*PASSED.stages[:4], StageResult("ptx", "skipped", "nvcc not found"),
                      *PASSED.stages[5:]])
FAILED_TESTS = run_of([*PASSED.stages[:5], StageResult("tests", "failed", "1 failed")])


@pytest.mark.parametrize(("validation", "why"), [
    (None, "not validated (no validation.json"),
    ({"overall": "passed"}, "not validated ("),
    ({"schema": 1, "overall": "passed", "upstream_sha": "0" * 40}, "old format"),
    (SKIPPED_PTX, "sm_120a: incomplete (skipped: ptx"),
    (FAILED_TESTS, "failed: sm_120a: failed (failed: tests"),
])
def test_refuses_without_passed_validation(scene: Scene, validation: Any, why: str) -> None:
    scene.write_validation(validation)
    code, [res] = scene.run()
    assert code == 1 and res["result"] == "error"
    assert "validation.json" in res["error"] and "--force" in res["error"]
    assert why in res["error"], res["error"]
    assert scene.fake.requests == [] and scene.fork_tip() is None
    code, [res] = scene.run(force=True)
    assert code == 0 and res["forced"] is True
    body = scene.prs()[0]["body"]
    first = body.splitlines()[0]
    assert first.endswith("Opened with `contrib open-pr --force`."), first
    if isinstance(validation, Validation):
        assert first.startswith("**Validation:** sm_120a: ") and "passed" not in first
        assert "**Validation was forced**" in body
    else:
        assert first.startswith("**Not validated**") and "**Not validated**" in body
    assert "contrib:patchset=proj/sm120" in body


@pytest.mark.parametrize("tamper", ["series", "patch", "settings", "copied", "base"])
def test_refuses_a_record_that_no_longer_binds(scene: Scene, tamper: str) -> None:
    """A passing record stops counting once what it validated changes, or when copied."""
    version = scene.ws.patchset(TARGET).current
    patch = next(version.dir.glob("0001-*.patch"))
    if tamper == "series":  # a second patch listed after the validate
        (version.dir / "0002-extra.patch").write_bytes(patch.read_bytes())
        (version.dir / "series").write_text(f"{patch.name}\n0002-extra.patch\n")
    elif tamper == "patch":
        patch.write_bytes(patch.read_bytes().replace(b"return 30", b"return 31"))
    elif tamper == "settings":
        meta = version.patchset.meta_path
        meta.write_text(meta.read_text() + '\n[validation]\nptx_flags = ["-O0"]\n')
    else:  # the record of another patchset (or another base), passing, copied here
        other = bound_record(version, PASSED)
        text = record_json(other)
        if tamper == "copied":
            text = text.replace('"patchset": "sm120"', '"patchset": "other"')
        else:
            text = text.replace(f'"base": "{version.base}"', f'"base": "{"1" * 40}"')
        version.validation_path.write_text(text)
    code, [res] = scene.run()
    assert code == 1 and "not validated" in res["error"], res
    want = {"series": "stale", "patch": "stale", "settings": "stale", "copied": "foreign",
            "base": "foreign"}[tamper]
    assert want in res["error"] and scene.fork_tip() is None
    status = run_contrib("status", "--no-fetch", "--json", cwd=scene.root)
    cell = status.json["patchsets"][0]["validation"]
    assert cell["validated"] is False and want in cell["reason"]


def test_foreign_commit_on_the_fork_branch_stops(scene: Scene) -> None:
    other = Repo(scene.tmp / "someone")
    sha = other.commit("their work", {"x.txt": "x\n"})
    git(other.path, "push", "-q", str(scene.fork), "HEAD:refs/heads/contrib/sm120")
    code, [res] = scene.run()
    assert code == 1 and "never pushed" in res["error"] and sha[:12] in res["error"]
    assert scene.fork_tip() == sha and scene.prs() == []


def test_commit_added_on_top_of_our_push_stops(scene: Scene) -> None:
    _, [first] = scene.run()
    clone = scene.tmp / "clone"
    git(scene.tmp, "clone", "-q", "-b", "contrib/sm120", str(scene.fork), str(clone))
    git(clone, "commit", "-q", "--allow-empty", "-m", "maintainer fixup",
        env={"GIT_AUTHOR_NAME": "M", "GIT_AUTHOR_EMAIL": "m@x", "GIT_COMMITTER_NAME": "M",
             "GIT_COMMITTER_EMAIL": "m@x"})
    git(clone, "push", "-q", "origin", "contrib/sm120")
    theirs = scene.fork_tip()
    scene.rebase()
    code, [res] = scene.run()
    assert code == 1 and "never pushed" in res["error"]
    assert scene.fork_tip() == theirs != first["tip"]
    assert scene.fake.calls("PATCH") == []


def test_refuses_push_url_that_is_the_upstream(scene: Scene) -> None:
    cfg = scene.root / "contrib.toml"
    cfg.write_text(cfg.read_text().replace(f'push_url = "{scene.fork}"',
                                           f'push_url = "{scene.upstream.path}"'))
    code, [res] = scene.run()
    assert code == 2 and "is the upstream" in res["error"]
    assert scene.fake.calls("POST") == []


def _all_bytes(*roots: Path) -> list[tuple[Path, bytes]]:
    found = []
    for root in roots:
        for path in root.rglob("*"):
            if path.is_file() and not path.is_symlink():
                found.append((path, path.read_bytes()))
    return found


def test_token_never_leaks(http_scene: Scene, githost: FakeGitHost, isolated: Path,
                           capsys: pytest.CaptureFixture[str]) -> None:
    """Plant a token, push over real smart HTTP that demands it, update after a rebase,
    then grep every output, request, PR body and file (incl. every .git/config)."""
    scene = http_scene
    token = scene.fake.token
    secrets = [token.encode(), base64.b64encode(f"x-access-token:{token}".encode())]
    outputs = []
    for args in (["open-pr", "--json", TARGET], ["open-pr", TARGET], ["status", "--no-fetch"]):
        res = run_contrib(*args, cwd=scene.root)
        assert res.code == 0, res.err
        outputs.append(res.out + res.err)
    scene.rebase()
    res = run_contrib("open-pr", "--dry-run", TARGET, cwd=scene.root)
    outputs.append(res.out + res.err)
    res = run_contrib("open-pr", TARGET, cwd=scene.root)
    assert res.code == 0, res.err
    outputs.append(res.out + res.err + "".join(capsys.readouterr()))
    [pr] = scene.prs()
    assert "git range-diff" in pr["body"] and scene.fork_tip() == pr["head"]["sha"]
    pushes = [r for r in githost.requests if r.path.endswith("/git-receive-pack")]
    assert len(pushes) == 2  # first push and the rebased one; the unchanged run pushed nothing
    assert all(r.headers["authorization"] == githost.expected_auth() for r in githost.requests)
    text = "\n".join(outputs) + json.dumps(scene.prs())
    assert token not in text and secrets[1].decode() not in text
    for req in scene.fake.requests:
        assert req.headers["authorization"] == f"token {token}"
        assert token.encode() not in req.body and token not in req.path + json.dumps(req.query)
    # every file: workspace (incl. patchset.toml, .contrib), cache, fork, upstream, HOME
    files = _all_bytes(scene.tmp, isolated)
    configs = [p for p, _ in files if p.name == "config" and p.parent.name.endswith(".git")]
    assert len(configs) >= 2  # the fork and the upstream cache at least
    for path, data in files:
        for secret in secrets:
            assert secret not in data, f"token found in {path}"


def test_fork_rejecting_the_token_is_one_clear_line(
        http_scene: Scene, githost: FakeGitHost) -> None:
    githost.token = "ghp_someOtherTokenThatTheForkWants"
    code, [res] = http_scene.run()
    assert code == 1
    assert res["error"].startswith(f"the fork at {githost.url}/{FORK}.git refused the token")
    assert "Contents: write" in res["error"]
    assert "\n" not in res["error"] and http_scene.fake.token not in res["error"]
    assert http_scene.prs() == [] and http_scene.fork_tip() is None


def _standing(validation: Validation) -> Standing:
    record = Record("proj", "sm120", "a" * 40, "sha256:" + "0" * 64, (validation.run(),))
    return Standing(record, "", tuple(arch_verdicts(record.runs, Settings().required())))


def _body(**kw: Any) -> str:
    data: dict[str, Any] = {
        "target": TARGET, "version": "a" * 40, "base_branch": "main", "summary": "Fix it.",
        "commits": [CommitLine("b" * 40, "0001-x.patch", "Fix | gate", "Dev")],
        "validation": _standing(PASSED)}
    data.update(kw)
    return render_body(BodyInput(**data))


def test_body_is_deterministic_and_safe_markdown() -> None:
    assert _body() == _body()
    assert "1. Fix \\| gate (Dev) — `0001-x.patch`, bbbbbbbbbbbb" in _body()
    assert _body().rstrip().endswith(f"<!-- contrib:patchset={TARGET} version={'a' * 40} -->")
    assert "Requires" not in _body()
    assert "**Requires:** flashinfer commit `2deed6c15`" in _body(
        requires=["flashinfer commit `2deed6c15`"])


def test_body_range_diff_is_fenced_and_bounded() -> None:
    body = _body(range_diff="1:  abc = 1:  def Fix\n```\n" + "x" * 50_000,
                 previous_version="c" * 40)
    assert "### Changes since the previous push (version cccccccccccc -> aaaaaaaaaaaa)" in body
    assert body.count("```") == 2 and "range-diff truncated" in body
    assert len(body) < 65_536 and "contrib:patchset=" in body


def test_body_never_carries_a_registered_secret() -> None:
    register_secret("ghp_plantedInSummary0000")
    body = _body(summary="oops ghp_plantedInSummary0000 pasted")
    assert "ghp_planted" not in body and "oops *** pasted" in body



def test_range_diff_survives_a_fresh_cache(scene: Scene, isolated: Path) -> None:
    """The old pushed commits are rebuilt from the old version folder (same SHAs)."""
    _, [first] = scene.run()
    shutil.rmtree(isolated / "contrib-cache")
    scene.rebase()
    code, [res] = scene.run()
    assert code == 0 and res["result"] == "updated"
    assert f"1:  {first['tip'][:7]} = 1:  {res['tip'][:7]}" in scene.prs()[0]["body"]


def test_create_that_times_out_but_lands_leaves_one_pr(scene: Scene) -> None:
    """The POST outlives the client timeout and lands later; a retry must not duplicate it."""
    scene.fake.delay_next("POST", f"/repos/{UPSTREAM}/pulls", seconds=2.5)
    code, [res] = scene.run(github_factory=functools.partial(fast_github, timeout=1))
    assert code == 0, res
    time.sleep(2)  # let the slow original finish on the server
    assert len(scene.prs()) == 1 and len(scene.fake.calls("POST")) == 2
    code, [again] = scene.run()
    assert code == 0 and again["result"] == "unchanged" and len(scene.prs()) == 1
