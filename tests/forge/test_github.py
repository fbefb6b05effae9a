"""GitHubForge against the fake GitHub server, over real HTTP, with real PyGithub."""

from __future__ import annotations

import io
import json
import logging
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from contrib.errors import GitHubError
from contrib.forge.api import ForgeUnavailable, PullRequestExists
from contrib.forge.github import GitHubForge
from testing.fake_github import FakeGitHub, Fault, fake_github_fixture  # noqa: F401

UP, FORK = "up/proj", "me/proj"
HEAD = "me:contrib/sm120"


def _api(fake: FakeGitHub, *, token: str | None = None, **kw: Any) -> GitHubForge:
    """A client with short retry waits and no write throttling, so tests stay fast."""
    opts: dict[str, Any] = {"retries": 2, "max_wait": 2.0, "backoff": 0.0, "write_interval": 0.0,
                            "timeout": 5}
    opts.update(kw)
    return GitHubForge(fake.url, token or fake.token, **opts)


@pytest.fixture
def gh(fake_github: FakeGitHub) -> FakeGitHub:
    fake_github.add_repo(UP)
    fake_github.add_repo(FORK, fork_of=UP)
    return fake_github


def _create(api: GitHubForge, head: str = HEAD, title: str = "Add SM120") -> Any:
    return api.create_draft_pr(UP, head=head, base="main", title=title, body="body text")


def test_create_draft_then_find_it(gh: FakeGitHub) -> None:
    api = _api(gh)
    assert api.find_pr(UP, HEAD, "main") is None
    pr = _create(api)
    assert (pr.number, pr.state, pr.draft, pr.merged) == (1, "open", True, False)
    assert pr.url == "https://github.com/up/proj/pull/1"
    assert (pr.head, pr.base, pr.title, pr.body) == (HEAD, "main", "Add SM120", "body text")
    found = api.find_pr(UP, HEAD, "main")
    assert found == pr
    post = gh.calls("POST", "/repos/up/proj/pulls")
    assert len(post) == 1
    assert post[0].json() == {"title": "Add SM120", "body": "body text", "base": "main", "head": HEAD,
                              "draft": True, "maintainer_can_modify": True}
    listing = gh.calls("GET", "/repos/up/proj/pulls")[-1]
    assert listing.query["state"] == "all" and listing.query["head"] == HEAD
    assert all(r.headers["authorization"] == f"token {gh.token}" for r in gh.requests)


def test_find_pr_ignores_other_heads_and_bases(gh: FakeGitHub) -> None:
    api = _api(gh)
    _create(api, head="me:contrib/other")
    assert api.find_pr(UP, HEAD, "main") is None
    assert api.find_pr(UP, "me:contrib/other", "release") is None
    assert api.find_pr(UP, "me:contrib/other", "main") is not None


def test_update_and_get(gh: FakeGitHub) -> None:
    api = _api(gh)
    pr = _create(api)
    updated = api.update_pr(UP, pr.number, title="v2", body="new body")
    assert (updated.title, updated.body, updated.number) == ("v2", "new body", pr.number)
    assert api.get_pr(UP, pr.number).body == "new body"
    patch = gh.calls("PATCH", "/repos/up/proj/pulls/1")
    assert [p.json() for p in patch] == [{"title": "v2", "body": "new body"}]
    assert len(gh.pulls(UP)) == 1


def test_duplicate_create_is_pull_request_exists(gh: FakeGitHub) -> None:
    api = _api(gh)
    _create(api)
    with pytest.raises(PullRequestExists, match="A pull request already exists for me:contrib/sm120"):
        _create(api)
    assert len(gh.pulls(UP)) == 1


def test_502_after_create_is_retried_into_already_exists(gh: FakeGitHub) -> None:
    """GithubRetry retries the POST; the server already made the PR, so GitHub says 422."""
    api = _api(gh)
    gh.fail_after_create()
    with pytest.raises(PullRequestExists):
        _create(api)
    assert len(gh.calls("POST")) == 2
    assert len(gh.pulls(UP)) == 1


def test_502_after_create_without_retries_is_unavailable(gh: FakeGitHub) -> None:
    api = _api(gh, retries=0)
    gh.fail_after_create()
    with pytest.raises(ForgeUnavailable, match="5xx|502"):
        _create(api)
    assert len(gh.pulls(UP)) == 1  # it landed: the caller must find it, not create again


def test_secondary_rate_limit_honours_retry_after(gh: FakeGitHub) -> None:
    api = _api(gh)
    fault = gh.rate_limit_next("GET", r"/repos/up/proj/pulls", count=1, retry_after=1)
    start = time.monotonic()
    assert api.find_pr(UP, HEAD, "main") is None
    assert time.monotonic() - start >= 0.9  # it waited as told
    assert fault.count == 0
    assert len(gh.calls("GET", "/repos/up/proj/pulls")) == 2


def test_retry_wait_is_bounded(gh: FakeGitHub) -> None:
    """A Retry-After of an hour is capped at max_wait; exhausted retries give one line."""
    api = _api(gh, retries=1, max_wait=0.3)
    gh.rate_limit_next("GET", r"/repos/up/proj/pulls", count=5, retry_after=3600)
    start = time.monotonic()
    with pytest.raises(GitHubError, match="rate limit") as info:
        api.find_pr(UP, HEAD, "main")
    assert time.monotonic() - start < 5
    assert "\n" not in str(info.value)


def test_bad_token_is_one_clear_line(gh: FakeGitHub) -> None:
    api = _api(gh, token="ghp_wrongwrongwrong")
    with pytest.raises(GitHubError) as info:
        api.find_pr(UP, HEAD, "main")
    assert str(info.value) == (
        "GitHub rejected the token (401 Bad credentials): set GITHUB_TOKEN to a valid token"
    )
    assert info.value.exit_code == 1
    assert "ghp_wrong" not in str(info.value)


def test_forbidden_names_the_missing_permission(gh: FakeGitHub) -> None:
    api = _api(gh)
    gh.add_fault(Fault("POST", r"/repos/up/proj/pulls", "status", status=403, body={
        "message": "Resource not accessible by personal access token",
        "documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request",
        "status": "403"}))
    with pytest.raises(GitHubError, match=r"^token lacks Pull requests: write on up/proj"):
        _create(api)
    assert gh.pulls(UP) == []


def test_unknown_repo_is_404_line(gh: FakeGitHub) -> None:
    with pytest.raises(GitHubError, match=r"^up/nope not found or the token cannot see it"):
        _api(gh).find_pr("up/nope", HEAD, "main")


def test_unknown_pr_number(gh: FakeGitHub) -> None:
    with pytest.raises(GitHubError, match=r"pull request #7 not found on up/proj"):
        _api(gh).get_pr(UP, 7)


def test_timeout_is_unavailable(gh: FakeGitHub) -> None:
    api = _api(gh, retries=0, timeout=1)
    gh.delay_next("GET", r"/repos/up/proj", seconds=2.5)
    start = time.monotonic()
    with pytest.raises(ForgeUnavailable, match="timed out"):
        api.find_pr(UP, HEAD, "main")
    assert time.monotonic() - start < 2.4


def test_connection_refused_is_one_line() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    api = GitHubForge(f"http://127.0.0.1:{port}", "ghp_x" * 4, retries=0, write_interval=0)
    with pytest.raises(ForgeUnavailable, match=r"could not read repository up/proj at .*could not connect"):
        api.find_pr(UP, HEAD, "main")


def test_merged_pr_reports_merge_info(gh: FakeGitHub) -> None:
    api = _api(gh)
    pr = _create(api)
    gh.merge_pr(UP, pr.number, merge_commit_sha="ab" * 20)
    found = api.find_pr(UP, HEAD, "main")
    assert found is not None
    assert (found.state, found.merged, found.merge_commit_sha) == ("closed", True, "ab" * 20)
    assert found.merged_at is not None and found.merged_at.endswith("Z")


def test_reopen_closed_but_not_merged(gh: FakeGitHub) -> None:
    api = _api(gh)
    pr = _create(api)
    gh.close_pr(UP, pr.number)
    assert api.get_pr(UP, pr.number).state == "closed"
    assert api.reopen_pr(UP, pr.number).state == "open"
    gh.merge_pr(UP, pr.number)
    with pytest.raises(GitHubError, match="422.*already been merged"):
        api.reopen_pr(UP, pr.number)


def test_find_prefers_open_pr_across_pages(gh: FakeGitHub) -> None:
    """35 closed PRs from the same head (two pages of 30), then an open one."""
    api = _api(gh, page_size=30)
    for _ in range(35):
        gh.close_pr(UP, _create(api).number)
    newest_closed = api.find_pr(UP, HEAD, "main")
    assert newest_closed is not None and newest_closed.number == 35
    opened = _create(api)
    pages = len(gh.calls("GET", "/repos/up/proj/pulls"))
    found = api.find_pr(UP, HEAD, "main")
    assert found is not None and found.number == opened.number == 36 and found.state == "open"
    assert len(gh.calls("GET", "/repos/up/proj/pulls")) - pages == 2  # followed the Link header


def test_token_only_ever_in_authorization_header(gh: FakeGitHub) -> None:
    api = _api(gh)
    pr = _create(api)
    api.update_pr(UP, pr.number, title="t", body="b")
    for req in gh.requests:
        assert gh.token not in req.body.decode() + req.path + json.dumps(req.query)
        others = {k: v for k, v in req.headers.items() if k != "authorization"}
        assert gh.token not in json.dumps(others)


def test_pygithub_log_lines_are_scrubbed(gh: FakeGitHub) -> None:
    """PyGithub prints retry notices to stderr itself; they pass through scrub() too."""
    api = _api(gh)
    [handler] = [h for h in logging.getLogger("github").handlers
                 if isinstance(h, logging.StreamHandler)]
    buffer = io.StringIO()
    old = handler.setStream(buffer)
    try:
        gh.rate_limit_next("GET", r"/repos/up/proj/pulls", retry_after=1)
        api.find_pr(UP, HEAD, "main")
        logging.getLogger("github.GithubRetry").info("echo %s", gh.token)
    finally:
        handler.setStream(old)
    assert "Retrying after 1 seconds" in buffer.getvalue()
    assert gh.token not in buffer.getvalue() and "echo ***" in buffer.getvalue()


def test_reopen_refused_after_force_push_while_closed(tmp_path: Path, fake_github: FakeGitHub) -> None:
    """GitHub's rule, which is why open-pr reopens before it pushes."""
    fork = tmp_path / "fork.git"
    subprocess.run(["git", "init", "-q", "--bare", str(fork)], check=True)
    work = tmp_path / "work"
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)

    def commit(msg: str) -> None:
        subprocess.run(["git", "-C", str(work), "commit", "-q", "--allow-empty", "-m", msg],
                       check=True)
        subprocess.run(["git", "-C", str(work), "push", "-q", "-f", str(fork),
                        "HEAD:refs/heads/contrib/sm120"], check=True)

    commit("one")
    fake_github.add_repo(UP)
    fake_github.add_repo(FORK, fork_of=UP, git_dir=str(fork))
    api = _api(fake_github)
    pr = _create(api)
    fake_github.close_pr(UP, pr.number)
    subprocess.run(["git", "-C", str(work), "commit", "-q", "--allow-empty", "--amend",
                    "-m", "one'"], check=True)
    commit("two")
    with pytest.raises(GitHubError, match="force-pushed or recreated"):
        api.reopen_pr(UP, pr.number)
