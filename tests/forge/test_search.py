"""Searching open PRs and reading a PR's files, through the real PyGithub client against
the fake GitHub's search API."""

from __future__ import annotations

from typing import Any

import pytest

from contrib.errors import GitHubError
from contrib.forge.api import FoundPr, PrFile
from contrib.forge.github import GitHubForge
from contrib.forge.recording import RecordingForge
from testing.fake_github import FakeGitHub, Fault, fake_github_fixture  # noqa: F401

UP = "up/proj"
PATCH = "@@ -5,3 +5,3 @@ def gen_norm_module():\n-    x = [9, 10]\n+    x = [9, 10, 12]\n"


def _forge(fake: FakeGitHub, **kw: Any) -> GitHubForge:
    return GitHubForge(fake.url, fake.token, retries=2, max_wait=2.0, backoff=0.0,
                       write_interval=0.0, timeout=5, notify=lambda line: None, **kw)


@pytest.fixture
def gh(fake_github: FakeGitHub) -> FakeGitHub:
    fake_github.add_repo(UP)
    fake_github.add_repo("other/proj")
    fake_github.add_pr_by(UP, "alice", title="[SM120] enable gen_norm_module",
                          files=[{"filename": "pkg/jit.py", "patch": PATCH}])
    fake_github.add_pr_by(UP, "bob", title="Support sm_120 in the norm path",
                          body="Widens `norm` for SM12x.")
    closed = fake_github.add_pr_by(UP, "carol", title="SM120 norm (old)")
    fake_github.close_pr(UP, closed)
    fake_github.add_issue(UP, "norm crashes on SM120", user="dave")
    fake_github.add_pr_by("other/proj", "erin", title="SM120 everywhere")
    return fake_github


def test_search_finds_open_prs_of_the_repo_by_any_of_the_words(gh: FakeGitHub) -> None:
    forge = _forge(gh)
    found = forge.search_prs(UP, "SM120 OR sm_120")
    assert [(p.number, p.user, p.state) for p in found] == [(2, "bob", "open"), (1, "alice", "open")]
    assert found[1] == FoundPr(1, f"https://github.com/{UP}/pull/1", "open",
                               "[SM120] enable gen_norm_module", "", "alice")
    (request,) = gh.calls("GET", "/search/issues")
    assert request.query["q"] == f"repo:{UP} is:pr is:open SM120 OR sm_120"


def test_search_needs_every_group_and_whole_words(gh: FakeGitHub) -> None:
    forge = _forge(gh)
    assert [p.number for p in forge.search_prs(UP, "gen_norm_module SM120")] == [1]
    assert forge.search_prs(UP, "gen_norm") == []  # a word of its own, not a prefix
    assert [p.number for p in forge.search_prs(UP, "SM12x")] == [2]  # in the body


def test_search_follows_every_page(gh: FakeGitHub) -> None:
    for n in range(7):
        gh.add_pr_by(UP, f"user{n}", title=f"sm120 part {n}")
    found = _forge(gh, page_size=3).search_prs(UP, "sm120")
    assert len(found) == 8 and len(gh.calls("GET", "/search/issues")) == 3


def test_pr_files_with_their_diffs(gh: FakeGitHub) -> None:
    forge = _forge(gh)
    assert forge.pr_files(UP, 1) == [PrFile("pkg/jit.py", "modified", PATCH)]
    assert forge.pr_files(UP, 2) == []
    with pytest.raises(GitHubError, match="pull request #99"):
        forge.pr_files(UP, 99)


def test_search_refused_by_the_server_is_one_line(gh: FakeGitHub) -> None:
    gh.add_fault(Fault("GET", "/search/issues", "status", status=422, body={
        "message": "Validation Failed", "errors": [{"resource": "Search", "field": "q",
                                                    "code": "invalid"}]}))
    with pytest.raises(GitHubError) as caught:
        _forge(gh).search_prs(UP, "SM120")
    assert "\n" not in str(caught.value) and "search" in str(caught.value)
    assert gh.token not in str(caught.value)


def test_recorder_reads_search_and_files_through(gh: FakeGitHub) -> None:
    recorder = RecordingForge(_forge(gh))
    assert [p.number for p in recorder.search_prs(UP, "gen_norm_module")] == [1]
    assert [f.filename for f in recorder.pr_files(UP, 1)] == ["pkg/jit.py"]
    assert recorder.writes == [] and len(recorder.calls) == 2
    assert RecordingForge(None).search_prs(UP, "SM120") == []
