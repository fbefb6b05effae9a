"""What a GitHub (or a proxy in front of GitHub Enterprise) can hand `contrib open-pr`
and `contrib status` that is not a proper answer, and bad GitHub settings.

Each case through the CLI: exit 1 (the server) or 2 (the settings), one line
on stderr naming the request or the key, no traceback, the workspace
byte-identical, nothing pushed, no PR made; long waits bounded and said; the
planted token in no output (the session audit checks that).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import testing.workspace as harness
from testing.audit import FIGURES, PLANTED
from testing.fake_github import FakeGitHub
from testing.gitutil import Repo
from testing.pr_scene import TARGET, UPSTREAM, Scene, fast_github
from testing.workspace import Result

REPO = rf"/repos/{UPSTREAM}"
PULLS = rf"/repos/{UPSTREAM}/pulls"
HTML = b"<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>SSO</body></html>"


def _wrong_types(field: str, value: Any) -> Callable[[Any], Any]:
    def mutate(data: Any) -> Any:
        for item in data if isinstance(data, list) else [data]:
            item[field] = value
        return data
    return mutate


# label: (inject, request named, what came back)
ANSWERS: dict[str, tuple[Callable[[FakeGitHub], Any], str, str]] = {
    "200 with invalid JSON": (
        lambda g: g.answer_raw("GET", PULLS, b'[{"number": 1', content_type="application/json"),
        f"GET /repos/{UPSTREAM}/pulls", "invalid JSON"),
    "200 with an HTML page": (
        lambda g: g.answer_raw("GET", REPO, HTML),
        f"GET /repos/{UPSTREAM}", "an HTML page ('<!DOCTYPE html> <html><head><title>Sign in"),
    "200 with plain text": (
        lambda g: g.answer_raw("GET", PULLS, b"OK", content_type="text/plain"),
        f"GET /repos/{UPSTREAM}/pulls", "text that is not JSON ('OK')"),
    "a JSON object where a list belongs": (
        lambda g: g.answer_json("GET", PULLS, {"pulls": []}),
        f"GET /repos/{UPSTREAM}/pulls", "the answer is a JSON object, not a JSON list"),
    "a JSON number where a repository belongs": (
        lambda g: g.answer_json("GET", REPO, 42),
        f"GET /repos/{UPSTREAM}", "the answer is the JSON value 42, not a JSON object"),
    "null where a created PR belongs": (
        lambda g: g.answer_json("POST", PULLS, None, status=201),
        f"POST /repos/{UPSTREAM}/pulls", "the answer is an empty answer or null, not a JSON object"),
    "PR number a string": (
        lambda g: g.mutate_next("POST", PULLS, _wrong_types("number", "1")),
        f"POST /repos/{UPSTREAM}/pulls", "number is '1', expected int"),
    "PR state unknown": (
        lambda g: g.mutate_next("POST", PULLS, _wrong_types("state", "merged-ish")),
        f"POST /repos/{UPSTREAM}/pulls", "state is 'merged-ish', expected one of open, closed"),
    "PR head a list": (
        lambda g: g.mutate_next("POST", PULLS, _wrong_types("head", [])),
        f"POST /repos/{UPSTREAM}/pulls", "head is a JSON list of 0, not a JSON object"),
    "PR merged_at not a time": (
        lambda g: g.mutate_next("POST", PULLS, _wrong_types("merged_at", "yesterday")),
        f"POST /repos/{UPSTREAM}/pulls", "merged_at is 'yesterday', expected a time"),
    "redirect to itself": (
        lambda g: g.redirect_next("GET", REPO, f"/repos/{UPSTREAM}", count=99),
        f"GET /repos/{UPSTREAM}", "it redirected in a loop or elsewhere"),
    "redirect loop between two paths": (
        lambda g: [g.redirect_next("GET", REPO, "/moved", count=99),
                   g.redirect_next("GET", "/moved", f"/repos/{UPSTREAM}", count=99)],
        f"GET /repos/{UPSTREAM}", "it redirected in a loop or elsewhere"),
    "redirect to another host": (
        lambda g: g.redirect_next("GET", REPO, "http://login.example.invalid/sso"),
        f"GET /repos/{UPSTREAM}", "it redirected in a loop or elsewhere"),
}


def _run(*args: str, cwd: Path) -> Result:
    """The CLI, through the audited runner (every output is searched for the token)."""
    return harness.run_contrib(*args, cwd=cwd)


@pytest.fixture
def scene(tmp_path: Path, upstream: Repo, planted_github: FakeGitHub) -> Scene:
    return Scene(tmp_path, upstream, planted_github)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".contrib" not in p.parts}


def _one_clean_line(result: Result, code: int) -> str:
    assert result.code == code, (result.code, result.err)
    lines = [x for x in result.err.strip().splitlines() if not x.startswith("fetching ")]
    assert len(lines) == 1, result.err
    assert "Traceback" not in result.err + result.out and PLANTED not in result.err + result.out
    return lines[0]


@pytest.mark.parametrize("label", list(ANSWERS))
def test_malformed_answer_is_one_line_naming_the_request(scene: Scene, label: str) -> None:
    inject, request, came_back = ANSWERS[label]
    before = _files(scene.root)
    inject(scene.fake)
    line = _one_clean_line(_run("open-pr", TARGET, cwd=scene.root), 1)
    assert f"GitHub's answer to {request} is not usable: " in line, line
    assert came_back in line, line
    assert _files(scene.root) == before or label.startswith(("PR ", "null"))
    assert len(scene.prs()) <= 1 and len(scene.fake.writes()) <= 1
    FIGURES["malformed GitHub answers refused in one line"] += 1


def test_after_a_malformed_create_the_next_run_finds_the_pr(scene: Scene) -> None:
    """The PR was made though its answer was garbage: the next run updates it, never a second."""
    scene.fake.mutate_next("POST", PULLS, _wrong_types("number", None))
    assert _run("open-pr", TARGET, cwd=scene.root).code == 1
    result = _run("open-pr", "--json", TARGET, cwd=scene.root)
    assert result.code == 0, result.err
    assert [r["result"] for r in result.json["results"]] == ["unchanged"]  # type: ignore[index]
    assert len(scene.prs()) == 1


def test_status_with_a_malformed_pr_answer(scene: Scene) -> None:
    code, _ = scene.run()
    assert code == 0
    scene.fake.mutate_next("GET", rf"{PULLS}/\d+", _wrong_types("html_url", 7))
    line = _one_clean_line(_run("status", cwd=scene.root), 1)
    assert f"GitHub's answer to GET /repos/{UPSTREAM}/pulls/1 is not usable: html_url is 7, " \
           "expected str" in line


# -- waits ----------------------------------------------------------------------------------------


def test_retry_after_within_the_bound_is_waited_and_said(scene: Scene) -> None:
    scene.fake.rate_limit_next("GET", PULLS, retry_after=2)
    start = time.monotonic()
    result = _run("open-pr", TARGET, cwd=scene.root)
    assert result.code == 0, result.err
    assert 1.9 <= time.monotonic() - start < 30
    assert "waiting 2 s for GitHub's rate limit (Retry-After) ..." in result.err
    FIGURES["long GitHub waits bounded and said"] += 1


@pytest.mark.parametrize("retry_after", ["99999", "Wed, 21 Oct 2099 07:28:00 GMT"])
def test_retry_after_past_the_bound_fails_at_once(scene: Scene, retry_after: str) -> None:
    scene.fake.rate_limit_next("POST", PULLS, retry_after=retry_after)
    start = time.monotonic()
    line = _one_clean_line(_run("open-pr", TARGET, cwd=scene.root), 1)
    assert time.monotonic() - start < 20  # the push and lookups, no wait
    assert "could not create a pull request on upstream-org/proj: GitHub's rate limit " \
           "(Retry-After) asks to wait" in line
    assert "more than contrib waits (60 s at once, 120 s in all); try again after " in line
    assert scene.prs() == []
    FIGURES["long GitHub waits bounded and said"] += 1


def test_server_that_never_answers_is_bounded(scene: Scene) -> None:
    """Accepts the connection, never answers: one timeout and one retry, then one line."""
    scene.fake.hang_next("GET", REPO, count=10)
    start = time.monotonic()
    code, [res] = scene.run(github_factory=functools.partial(fast_github, timeout=1, retries=5))
    assert time.monotonic() - start < 10
    assert code == 1 and "the request timed out" in res["error"] and "\n" not in res["error"]
    assert len(scene.fake.calls("GET", REPO)) == 2 and scene.prs() == []
    FIGURES["long GitHub waits bounded and said"] += 1


# -- settings ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("api_url", ["http://127.0.0.1:99999", "http://[::1", "http://[::1]:x/api",
                                     "https://[fe80::1%25eth0/api"])
@pytest.mark.parametrize("command", [("open-pr", TARGET), ("open-pr", "--dry-run", TARGET),
                                     ("status",)])
def test_bad_api_url_names_the_key(scene: Scene, api_url: str, command: tuple[str, ...]) -> None:
    config = scene.root / "contrib.toml"
    config.write_text(config.read_text().replace(scene.fake.url, api_url))
    before = _files(scene.root)
    line = _one_clean_line(_run(*command, cwd=scene.root), 2)
    assert f"contrib.toml [github] api_url: {api_url!r} is not a usable URL" in line, line
    assert _files(scene.root) == before and scene.fake.requests == []
    FIGURES["bad GitHub settings refused (exit 2)"] += 1


@pytest.mark.parametrize("token", ["ghp_\u2019quote" + "x" * 30, "ghp_\u00e9t\u00e9\u4e2d" + "x" * 30])
def test_non_latin1_token_is_exit_2(scene: Scene, token: str,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", token)
    for command in (("open-pr", TARGET), ("open-pr", "--dry-run", TARGET), ("status",)):
        result = _run(*command, cwd=scene.root)
        line = _one_clean_line(result, 2)
        assert "the GitHub token from GITHUB_TOKEN contains characters that are not Latin-1" in line
        assert token not in result.out + result.err
    assert scene.fake.requests == [] and scene.fork_tip() is None
    FIGURES["bad GitHub settings refused (exit 2)"] += 1
