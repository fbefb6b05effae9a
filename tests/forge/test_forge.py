"""The Forge on GitHub: issues, comments, checks, reviews, the token's user, and the
recorder, through the real PyGithub client against the fake GitHub."""

from __future__ import annotations

import time
from typing import Any

import pytest

from contrib.errors import ConfigError, GitHubError
from contrib.forge.api import (
    ChecksSummary,
    CheckState,
    ForgeUnavailable,
    Issue,
    MalformedAnswer,
    RateLimited,
    ReviewState,
    check_api_url,
)
from contrib.forge.connect import connect
from contrib.forge.github import GitHubForge
from contrib.forge.recording import RecordingForge
from contrib.workspace.config import Config
from testing.fake_github import FakeGitHub, fake_github_fixture  # noqa: F401

REPO, UP, FORK = "me/workspace", "up/proj", "me/proj"
SHA = "ab" * 20


def _forge(fake: FakeGitHub, **kw: Any) -> GitHubForge:
    """A client with short waits and no write throttling, so tests stay fast."""
    opts: dict[str, Any] = {"retries": 2, "max_wait": 2.0, "backoff": 0.0, "write_interval": 0.0,
                            "timeout": 5, "notify": lambda line: None}
    opts.update(kw)
    return GitHubForge(fake.url, fake.token, **opts)


@pytest.fixture
def gh(fake_github: FakeGitHub) -> FakeGitHub:
    fake_github.add_repo(REPO, push=True)
    fake_github.add_repo(UP)
    fake_github.add_repo(FORK, fork_of=UP)
    return fake_github


# -- issues and comments ---------------------------------------------------------------


def test_issue_lifecycle(gh: FakeGitHub) -> None:
    forge = _forge(gh)
    assert forge.list_issues(REPO) == []
    made = forge.create_issue(REPO, title="contrib dashboard", body="<!-- contrib:dashboard -->")
    assert made == Issue(1, f"https://github.com/{REPO}/issues/1", "open", "contrib dashboard",
                         "<!-- contrib:dashboard -->")
    assert forge.edit_issue(REPO, 1, state="closed").state == "closed"
    assert forge.list_issues(REPO) == [forge.get_issue(REPO, 1)]  # closed ones are listed too
    reopened = forge.edit_issue(REPO, 1, body="new body", state="open")
    assert (reopened.state, reopened.body, reopened.title) == ("open", "new body", made.title)
    assert [r.json() for r in gh.calls("PATCH")] == [{"state": "closed"},
                                                    {"body": "new body", "state": "open"}]
    assert gh.calls("GET", f"/repos/{REPO}/issues")[-1].query["state"] == "all"


def test_list_issues_follows_every_page_and_leaves_prs_out(gh: FakeGitHub) -> None:
    for n in range(230):
        gh.add_issue(REPO, f"issue {n}", state="closed" if n % 3 else "open")
    forge = _forge(gh)
    forge.create_draft_pr(UP, head="up:feature", base="main", title="a PR", body="")
    gh.add_issue(UP, "upstream issue")
    issues = forge.list_issues(REPO)
    assert sorted(i.number for i in issues) == list(range(1, 231))
    assert {i.state for i in issues} == {"open", "closed"}
    assert len(gh.calls("GET", f"/repos/{REPO}/issues")) == 3  # 100 + 100 + 30
    assert [i.title for i in forge.list_issues(UP)] == ["upstream issue"]  # the PR is not one


def test_comments_on_issues_and_prs(gh: FakeGitHub) -> None:
    forge = _forge(gh, page_size=2)
    pr = forge.create_draft_pr(UP, head="me:contrib/x", base="main", title="t", body="b")
    for n in range(5):
        forge.create_comment(UP, pr.number, f"landed as {n}")
    comments = forge.list_comments(UP, pr.number)
    assert [c.body for c in comments] == [f"landed as {n}" for n in range(5)]  # oldest first
    assert {c.user for c in comments} == {gh.login}
    assert comments[0].url.startswith(f"https://github.com/{UP}/issues/{pr.number}#issuecomment-")
    with pytest.raises(GitHubError, match=r"^issue #9 not found on up/proj \(404\)"):
        forge.list_comments(UP, 9)


def test_issue_create_answered_502_after_it_landed_is_not_repeated(gh: FakeGitHub) -> None:
    """A retry would make a second issue: fail, and let the caller look first."""
    forge = _forge(gh)
    gh.fail_after("POST", f"/repos/{REPO}/issues")
    with pytest.raises(ForgeUnavailable, match=r"GitHub failed to create an issue on me/workspace"):
        forge.create_issue(REPO, title="contrib dashboard", body="x")
    assert len(gh.calls("POST")) == 1
    assert [i.title for i in forge.list_issues(REPO)] == ["contrib dashboard"]


def test_comment_is_not_retried_after_a_502_but_waits_out_a_rate_limit(gh: FakeGitHub) -> None:
    forge = _forge(gh)
    number = gh.add_issue(REPO, "x")
    gh.fail_after("POST", rf"/repos/{REPO}/issues/{number}/comments")
    with pytest.raises(ForgeUnavailable):
        forge.create_comment(REPO, number, "once")
    gh.rate_limit_next("POST", rf"/repos/{REPO}/issues/{number}/comments", retry_after=0)
    forge.create_comment(REPO, number, "twice")
    assert [c["body"] for c in gh.comments(REPO, number)] == ["once", "twice"]


# -- checks and reviews ---------------------------------------------------------------------


def test_checks_count_check_runs_and_statuses_together(gh: FakeGitHub) -> None:
    forge = _forge(gh, page_size=2)
    assert forge.checks(UP, SHA) == ChecksSummary(0, 0, 0, 0, CheckState.NONE)
    gh.add_check_run(UP, SHA, "build", conclusion="success")
    gh.add_check_run(UP, SHA, "lint", conclusion="skipped")
    gh.add_check_run(UP, SHA, "gpu sm_120", status="in_progress")
    gh.set_status(UP, SHA, "ci/legacy", "success")
    summary = forge.checks(UP, SHA)
    assert summary == ChecksSummary(4, 3, 0, 1, CheckState.PENDING)
    assert summary.text() == "3/4 passed, 1 pending"
    gh.set_status(UP, SHA, "ci/legacy", "error")
    assert forge.checks(UP, SHA).state == CheckState.FAILURE
    assert len(gh.calls("GET", f"/repos/{UP}/commits/{SHA}/check-runs")) == 1 + 2 + 2  # pages of 2


@pytest.mark.parametrize(("reviews", "expected"), [
    ([], ReviewState.REVIEW_REQUIRED),
    ([("ann", "COMMENTED")], ReviewState.REVIEW_REQUIRED),
    ([("ann", "APPROVED"), ("bob", "COMMENTED")], ReviewState.APPROVED),
    ([("ann", "APPROVED"), ("bob", "CHANGES_REQUESTED")], ReviewState.CHANGES_REQUESTED),
    ([("bob", "CHANGES_REQUESTED"), ("bob", "APPROVED")], ReviewState.APPROVED),
    ([("bob", "APPROVED"), ("bob", "DISMISSED")], ReviewState.REVIEW_REQUIRED),
])
def test_review_state_is_each_reviewers_latest_decision(
        gh: FakeGitHub, reviews: list[tuple[str, str]], expected: ReviewState) -> None:
    forge = _forge(gh)
    pr = forge.create_draft_pr(UP, head="me:contrib/x", base="main", title="t", body="b")
    for login, state in reviews:
        gh.add_review(UP, pr.number, login, state)
    assert forge.review_state(UP, pr.number) == expected


# -- the token -------------------------------------------------------------------------------


def test_current_user_and_scopes(gh: FakeGitHub) -> None:
    user = _forge(gh).current_user()
    assert (user.login, user.scopes) == ("contrib-bot", ("repo", "workflow"))
    gh.scopes = None  # a fine-grained token: no X-OAuth-Scopes header at all
    assert _forge(gh).current_user().scopes is None


def test_push_permission(gh: FakeGitHub) -> None:
    forge = _forge(gh)
    assert forge.can_push(REPO) is True and forge.can_push(UP) is False


# -- construction -------------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["http://127.0.0.1:99999", "http://[::1", "http://[zz::1]/api",
                                 "https://ghe.example:port/api/v3", "ftp://x", "https://"])
def test_bad_api_url_names_the_key(tmp_path: Any, url: str) -> None:
    config = Config(path=tmp_path / "contrib.toml", upstreams={}, github_api_url=url)
    with pytest.raises(ConfigError, match=r"contrib.toml \[github\] api_url: ") as info:
        connect(config, "ghp_" + "x" * 36)
    assert info.value.exit_code == 2 and "\n" not in str(info.value)


def test_good_api_urls_pass() -> None:
    assert check_api_url("https://[::1]:8443/api/v3/", "k") == "https://[::1]:8443/api/v3"


def test_token_with_a_newline_inside_is_exit_2(tmp_path: Any) -> None:
    config = Config(path=tmp_path / "contrib.toml", upstreams={}, github_api_url="http://h")
    with pytest.raises(ConfigError, match="contains characters that are spaces or control "
                                          "characters") as info:
        connect(config, "ghp_abc\nX-Injected: 1")
    assert info.value.exit_code == 2 and "X-Injected" not in str(info.value)


def test_non_latin1_token_is_exit_2(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    token = "ghp_\u2019" + "x" * 30
    monkeypatch.setenv("GITHUB_TOKEN", token)
    config = Config(path=tmp_path / "contrib.toml", upstreams={}, github_api_url="http://h")
    with pytest.raises(ConfigError, match="token from GITHUB_TOKEN contains characters that are "
                                          "not Latin-1") as info:
        connect(config, token)
    assert info.value.exit_code == 2 and token not in str(info.value)


# -- the recorder ----------------------------------------------------------------------------------


def test_recorder_reads_through_and_writes_nothing(gh: FakeGitHub) -> None:
    gh.add_issue(REPO, "old dashboard", "<!-- contrib:dashboard -->", state="closed")
    recorder = RecordingForge(_forge(gh))
    [old] = recorder.list_issues(REPO)
    recorder.edit_issue(REPO, old.number, body="fresh", state="open")
    made = recorder.create_issue(REPO, title="second", body="b")
    recorder.create_comment(REPO, old.number, "hello\nworld")
    pr = recorder.create_draft_pr(UP, head="me:contrib/x", base="main", title="t", body="b")
    assert recorder.find_pr(UP, "me:contrib/x", "main") == pr  # this run sees its own writes
    listed = {i.number: i for i in recorder.list_issues(REPO)}
    assert listed[old.number].state == "open" and listed[made.number].title == "second"
    assert gh.writes() == [] and gh.issues(REPO)[0]["state"] == "closed"
    assert [str(c) for c in recorder.writes] == [
        f"PATCH /repos/{REPO}/issues/{old.number} body, state=open",
        f"POST /repos/{REPO}/issues title='second'",
        f"POST /repos/{REPO}/issues/{old.number}/comments body='hello'",
        f"POST /repos/{UP}/pulls head=me:contrib/x draft=true",
    ]


def test_recorder_without_token_finds_nothing() -> None:
    recorder = RecordingForge(None)
    assert recorder.list_issues(REPO) == [] and recorder.find_pr(UP, "a:b", "main") is None
    assert recorder.checks(UP, SHA).state == CheckState.NONE
    assert all(c.note == "skipped: no token" for c in recorder.calls)


# -- malformed answers and bounded waits --------------------------------------------------------------


def _typed_wrong(field: str, value: Any) -> Any:
    def mutate(data: Any) -> Any:
        for pr in data if isinstance(data, list) else [data]:
            pr[field] = value
        return data
    return mutate


MALFORMED = {
    "invalid JSON": (lambda g: g.answer_raw("GET", f"/repos/{UP}/pulls", b'{"number": 1,',
                                            content_type="application/json"),
                     "invalid JSON"),
    "HTML page": (lambda g: g.answer_raw("GET", f"/repos/{UP}/pulls",
                                         b"<!DOCTYPE html><html><body>Sign in</body></html>"),
                  "the answer is an HTML page ('<!DOCTYPE html><html><body>Sign in"),
    "wrong shape": (lambda g: g.answer_json("GET", f"/repos/{UP}/pulls", {"items": []}),
                    "the answer is a JSON object, not a JSON list"),
    "number a string": (lambda g: g.mutate_next("GET", f"/repos/{UP}/pulls",
                                                _typed_wrong("number", "1")),
                        "pull request '1': number is '1', expected int"),
    "head a string": (lambda g: g.mutate_next("GET", f"/repos/{UP}/pulls",
                                              _typed_wrong("head", "me:contrib/x")),
                      "pull request 1: head is the JSON value 'me:contrib/x', not a JSON object"),
    "draft a string": (lambda g: g.mutate_next("GET", f"/repos/{UP}/pulls",
                                               _typed_wrong("draft", "no")),
                       "pull request 1: draft is 'no', expected bool"),
    "redirect to itself": (lambda g: g.redirect_next("GET", f"/repos/{UP}/pulls",
                                                     f"/repos/{UP}/pulls", 50),
                           "it redirected in a loop or elsewhere"),
    "redirect loop": (lambda g: [g.redirect_next("GET", f"/repos/{UP}/pulls", "/elsewhere", 50),
                                 g.redirect_next("GET", "/elsewhere", f"/repos/{UP}/pulls", 50)],
                      "it redirected in a loop or elsewhere"),
}


@pytest.mark.parametrize("label", list(MALFORMED))
def test_malformed_answer_is_one_line_naming_the_request(gh: FakeGitHub, label: str) -> None:
    forge = _forge(gh)
    forge.create_draft_pr(UP, head="me:contrib/x", base="main", title="t", body="b")
    inject, says = MALFORMED[label]
    inject(gh)
    with pytest.raises(MalformedAnswer) as info:
        forge.find_pr(UP, "me:contrib/x", "main")
    message = str(info.value)
    assert message.startswith(f"GitHub's answer to GET /repos/{UP}/pulls is not usable: ")
    assert says in message and "\n" not in message and gh.token not in message
    assert info.value.exit_code == 1
    assert len(gh.requests) < 30  # a loop is cut short, not followed to the recursion limit


def test_short_retry_after_is_waited_and_said(gh: FakeGitHub) -> None:
    said: list[str] = []
    forge = _forge(gh, notify=said.append)
    gh.rate_limit_next("GET", f"/repos/{REPO}/issues", retry_after=1)
    start = time.monotonic()
    assert forge.list_issues(REPO) == []
    assert time.monotonic() - start >= 0.9
    assert said == ["waiting 1 s for GitHub's rate limit (Retry-After) ..."]


def test_retry_after_past_the_bound_fails_at_once(gh: FakeGitHub) -> None:
    said: list[str] = []
    forge = _forge(gh, max_wait=60.0, notify=said.append)
    gh.rate_limit_next("GET", f"/repos/{REPO}/issues", retry_after=99999)
    start = time.monotonic()
    with pytest.raises(RateLimited) as info:
        forge.list_issues(REPO)
    assert time.monotonic() - start < 2 and said == []
    message = str(info.value)
    assert message.startswith("could not list the issues of me/workspace: GitHub's rate limit "
                              "(Retry-After) asks to wait 99999 s, more than contrib waits (60 s")
    assert info.value.retry_at is not None and message.endswith(f"try again after {info.value.retry_at}")


def test_primary_rate_limit_reset_soon_is_waited_and_said(gh: FakeGitHub) -> None:
    said: list[str] = []
    forge = _forge(gh, max_wait=8.0, notify=said.append)
    # A reset 1 s ahead (in whole seconds) could be past by the time a loaded
    # machine sends the request, and a wait under 1 s is not said.
    gh.primary_rate_limit_next("GET", f"/repos/{REPO}/issues", reset_in=3)
    assert forge.list_issues(REPO) == []
    assert len(said) == 1 and said[0].startswith("waiting ")
    assert said[0].endswith(" s for GitHub's rate limit ...")


def test_primary_rate_limit_reset_late_fails_at_once(gh: FakeGitHub) -> None:
    forge = _forge(gh, max_wait=60.0)
    gh.primary_rate_limit_next("GET", f"/repos/{REPO}/issues", reset_in=7200)
    start = time.monotonic()
    with pytest.raises(RateLimited, match=r"^GitHub rate limit hit while trying to list the "
                                          r"issues of me/workspace \(403 API rate limit exceeded"
                                          r".*\); try again after 20\d\d-"):
        forge.list_issues(REPO)
    assert time.monotonic() - start < 2


def test_retry_after_budget_bounds_the_sum_of_waits(gh: FakeGitHub) -> None:
    """Each wait is under the bound, but together they would pass twice max_wait."""
    said: list[str] = []
    forge = _forge(gh, max_wait=1.0, retries=5, notify=said.append)
    gh.rate_limit_next("GET", f"/repos/{REPO}/issues", count=5, retry_after=1)
    with pytest.raises(RateLimited, match="more than contrib waits"):
        forge.list_issues(REPO)
    assert said == ["waiting 1 s for GitHub's rate limit (Retry-After) ..."] * 2


def test_server_that_never_answers_is_bounded(gh: FakeGitHub) -> None:
    forge = _forge(gh, timeout=1, retries=5)
    gh.hang_next("GET", f"/repos/{REPO}/issues", count=5)
    start = time.monotonic()
    with pytest.raises(ForgeUnavailable, match="the request timed out"):
        forge.list_issues(REPO)
    assert time.monotonic() - start < 4  # one wait and one retry, not five
    assert len(gh.calls("GET", f"/repos/{REPO}/issues")) == 2
    start = time.monotonic()  # the next request is not sent: it would wait as long again
    with pytest.raises(ForgeUnavailable, match="did not answer earlier in this run .timed out.; "
                                               "not asked again"):
        forge.get_issue(REPO, 1)
    assert time.monotonic() - start < 0.5 and len(gh.requests) == 2


def test_find_pr_keeps_only_the_asked_head_when_the_server_ignores_the_filter(
        gh: FakeGitHub) -> None:
    forge = _forge(gh)
    other = forge.create_draft_pr(UP, head="up:contrib/x", base="main", title="t", body="")
    gh.answer_json("GET", f"/repos/{UP}/pulls", [gh.pulls(UP)[0]], count=2)  # query dropped
    assert forge.find_pr(UP, "me:contrib/x", "main") is None
    assert forge.find_pr(UP, "UP:contrib/x", "main") == forge.get_pr(UP, other.number)
