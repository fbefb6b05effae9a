"""The Forge on GitHub, through PyGithub.

PyGithub carries every request: ``Auth.Token``, ``base_url`` (GitHub
Enterprise too), ``GithubRetry`` bounded by :mod:`contrib.forge.http`, its
write throttling.  contrib sends requests through PyGithub's ``Requester`` and
checks each answer's shape itself (:mod:`contrib.forge.shapes`) instead of
trusting PyGithub's lazy objects, which turn an HTML page or a wrongly typed
field into a crash far from the request.  Tests run this class against the
fake GitHub server in ``tests/fake_github.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import requests
from github import Auth, Github, GithubException

from contrib.forge import shapes
from contrib.forge.api import (
    DEFAULT_API_URL,
    ChecksSummary,
    Comment,
    ForgeUnavailable,
    FoundPr,
    Issue,
    PrFile,
    PullRequest,
    ReviewState,
    User,
    check_token,
)
from contrib.forge.http import (
    Notify,
    RedirectLoop,
    WaitTooLong,
    github_error,
    make_retry,
    network_error,
    say_on_stderr,
    too_long,
)
from contrib.secrets import register_secret, scrub

MAX_PAGES = 100  # 10,000 items at 100 a page; a Link loop must end somewhere

class _ScrubLogs(logging.Filter):
    """PyGithub logs retries to stderr ("Retrying after 1 seconds"); scrub them too."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = scrub(record.getMessage()), None
        return True


def _scrub_pygithub_logs() -> None:
    for handler in logging.getLogger("github").handlers:
        if not any(isinstance(f, _ScrubLogs) for f in handler.filters):
            handler.addFilter(_ScrubLogs())


class GitHubForge:
    """:class:`~contrib.forge.api.Forge` over PyGithub.

    ``retries``/``max_wait``/``backoff`` bound the time spent retrying and
    waiting (each wait at most ``max_wait`` s, all of one request's at most
    twice that); ``timeout`` bounds each wait for an answer; ``write_interval``
    is PyGithub's pause between writes (GitHub asks for one second to avoid
    secondary rate limits; tests pass 0); ``notify`` says each wait.
    """

    def __init__(self, api_url: str, token: str, *, retries: int = 5, max_wait: float = 60.0,
                 backoff: float = 1.0, timeout: int = 15, write_interval: float = 1.0,
                 page_size: int = 100, notify: Notify = say_on_stderr) -> None:
        register_secret(token)
        check_token(token)
        _scrub_pygithub_logs()
        self.api_url = (api_url or DEFAULT_API_URL).rstrip("/")
        self.max_wait = max_wait
        self.page_size = page_size
        self._repos: dict[str, bool] = {}  # repo -> permissions.push, read once
        self._silent: str | None = None  # why the server stopped answering, once it has
        self._gh, self._gh_once = (Github(
            auth=Auth.Token(token),
            base_url=self.api_url,
            timeout=timeout,
            retry=make_retry(retries=retries, max_wait=max_wait, backoff=backoff, notify=notify,
                             replayable=replayable),
            seconds_between_requests=None,
            seconds_between_writes=write_interval or None,
        ) for replayable in (True, False))

    # -- requests ---------------------------------------------------------------------

    def _call(self, method: str, path: str, action: str, *, repo: str = "",
              params: dict[str, Any] | None = None, payload: dict[str, Any] | None = None,
              thing: str | None = None, need: str = "Pull requests: write",
              replayable: bool = True) -> tuple[shapes.Answer, dict[str, Any]]:
        """One request; (its answer, its headers), or one GitHubError line.

        ``replayable=False``: a 5xx or a timeout is not retried (see make_retry).
        """
        request = f"{method} {path.removeprefix(self.api_url)}"
        if self._silent is not None:  # each request would wait its timeout again
            raise ForgeUnavailable(scrub(
                f"could not {action} at {self.api_url}: it did not answer earlier in this run "
                f"({self._silent}); not asked again"))
        client = self._gh if replayable else self._gh_once
        with self._errors(repo or path, action, request, thing, need):
            headers, data = client.requester.requestJsonAndCheck(
                method, path, parameters=params, input=payload)
        return shapes.Answer(request, data), headers

    def _pages(self, path: str, action: str, *, repo: str, params: dict[str, Any] | None = None,
               key: str | None = None, thing: str | None = None,
               need: str = "Pull requests: write") -> tuple[shapes.Answer, list[Any]]:
        """Every item of a paginated list, following ``Link: rel="next"``."""
        params = {**(params or {}), "per_page": self.page_size}
        url, answer = path, shapes.Answer(f"GET {path}", None)
        items: list[Any] = []
        for _ in range(MAX_PAGES):
            answer, headers = self._call("GET", url, action, repo=repo, params=params,
                                         thing=thing, need=need)
            page = answer.items() if key is None else answer.field(
                answer.obj(answer.data), key, list)
            items.extend(page)
            next_url = self._next_page(answer, headers)
            if next_url is None:
                return shapes.Answer(f"GET {path}", items), items
            url, params = next_url, None
        raise answer.fail(f"more than {MAX_PAGES} pages")

    def _next_page(self, answer: shapes.Answer, headers: dict[str, Any]) -> str | None:
        links = requests.utils.parse_header_links(str(headers.get("link") or ""))
        url = next((str(x.get("url")) for x in links if x.get("rel") == "next"), None)
        if url is not None and not url.startswith(self.api_url + "/"):
            raise answer.fail(f"its next page is outside {self.api_url} ({url[:80]})")
        return url

    @contextmanager
    def _errors(self, repo: str, action: str, request: str, thing: str | None,
                need: str) -> Iterator[None]:
        try:
            yield
        except GithubException as e:
            raise github_error(e, repo=repo, action=action, thing=thing, need=need) from None
        except requests.exceptions.RequestException as e:
            if isinstance(e, requests.exceptions.Timeout | requests.exceptions.ConnectionError):
                self._silent = "timed out" if isinstance(e, requests.exceptions.Timeout) \
                    or "timed out" in str(e).lower() else "could not connect"
            raise network_error(e, self.api_url, action) from None
        except WaitTooLong as e:
            raise too_long(e, action, self.max_wait) from None
        except (RedirectLoop, RuntimeError) as e:  # PyGithub raises RuntimeError on odd 301s
            raise shapes.Answer(request, None).fail(
                f"it redirected in a loop or elsewhere ({scrub(str(e))[:120]})") from None
        except ValueError as e:  # invalid JSON in a body that starts like JSON
            raise shapes.Answer(request, None).fail(f"invalid JSON ({e})") from None

    # -- pull requests ------------------------------------------------------------------

    def find_pr(self, repo: str, head: str, base: str) -> PullRequest | None:
        self._repo(repo)
        answer, items = self._pages(f"/repos/{repo}/pulls", f"list pull requests of {repo}",
                                    repo=repo, params={"state": "all", "head": head, "base": base})
        found = [shapes.pull_request(answer, v, shapes.item_label("pull request", v))
                 for v in items]
        # A server that ignores the filters must not hand us someone else's PR to update
        # (logins are case-insensitive on GitHub, so the label is compared without case).
        found = [p for p in found if p.head.lower() == head.lower() and p.base == base]
        if not found:
            return None
        found.sort(key=lambda p: (p.state == "open", p.number), reverse=True)
        return found[0]

    def create_draft_pr(self, repo: str, *, head: str, base: str, title: str, body: str,
                        maintainer_can_modify: bool = True) -> PullRequest:
        self._repo(repo)
        payload = {"title": title, "body": body, "base": base, "head": head, "draft": True,
                   "maintainer_can_modify": maintainer_can_modify}
        answer, _ = self._call("POST", f"/repos/{repo}/pulls",
                               f"create a pull request on {repo}", repo=repo, payload=payload)
        return shapes.pull_request(answer, answer.data)

    def update_pr(self, repo: str, number: int, *, title: str, body: str) -> PullRequest:
        return self._edit_pr(repo, number, "update", {"title": title, "body": body})

    def reopen_pr(self, repo: str, number: int) -> PullRequest:
        return self._edit_pr(repo, number, "reopen", {"state": "open"})

    def _edit_pr(self, repo: str, number: int, verb: str, payload: dict[str, Any]) -> PullRequest:
        self._repo(repo)
        answer, _ = self._call("PATCH", f"/repos/{repo}/pulls/{number}",
                               f"{verb} pull request #{number} on {repo}", repo=repo,
                               payload=payload, thing=f"pull request #{number}")
        return shapes.pull_request(answer, answer.data)

    def get_pr(self, repo: str, number: int) -> PullRequest:
        self._repo(repo)
        answer, _ = self._call("GET", f"/repos/{repo}/pulls/{number}",
                               f"read pull request #{number} on {repo}", repo=repo,
                               thing=f"pull request #{number}")
        return shapes.pull_request(answer, answer.data)

    def review_state(self, repo: str, number: int) -> ReviewState:
        answer, items = self._pages(f"/repos/{repo}/pulls/{number}/reviews",
                                    f"read the reviews of pull request #{number} on {repo}",
                                    repo=repo, thing=f"pull request #{number}",
                                    need="Pull requests: read")
        return shapes.review_decision(answer, items)

    def checks(self, repo: str, sha: str) -> ChecksSummary:
        runs_answer, runs = self._pages(
            f"/repos/{repo}/commits/{sha}/check-runs", f"read the check runs of {sha[:12]}",
            repo=repo, key="check_runs", thing=f"commit {sha[:12]}", need="Checks: read")
        verdicts = [shapes.check_run_verdict(runs_answer, run) for run in runs]
        answer, _ = self._call("GET", f"/repos/{repo}/commits/{sha}/status",
                               f"read the commit status of {sha[:12]}", repo=repo,
                               thing=f"commit {sha[:12]}", need="Commit statuses: read")
        return shapes.summary(verdicts + shapes.status_verdicts(answer))

    def search_prs(self, repo: str, words: str) -> list[FoundPr]:
        query = f"repo:{repo} is:pr is:open {words}"
        answer, items = self._pages("/search/issues", f"search the open pull requests of {repo}",
                                    repo=repo, params={"q": query}, key="items",
                                    need="Pull requests: read")
        return [shapes.found_pr(answer, v, shapes.item_label("pull request", v)) for v in items
                if shapes.is_pull_request(answer, v)]

    def pr_files(self, repo: str, number: int) -> list[PrFile]:
        answer, items = self._pages(f"/repos/{repo}/pulls/{number}/files",
                                    f"list the files of pull request #{number} on {repo}",
                                    repo=repo, thing=f"pull request #{number}",
                                    need="Pull requests: read")
        return [shapes.pr_file(answer, v) for v in items]

    # -- issues and comments -------------------------------------------------------------

    def list_issues(self, repo: str) -> list[Issue]:
        answer, items = self._pages(f"/repos/{repo}/issues", f"list the issues of {repo}",
                                    repo=repo, params={"state": "all"}, need="Issues: read")
        return [shapes.issue(answer, v, shapes.item_label("issue", v)) for v in items
                if not shapes.is_pull_request(answer, v)]

    def create_issue(self, repo: str, *, title: str, body: str) -> Issue:
        answer, _ = self._call("POST", f"/repos/{repo}/issues", f"create an issue on {repo}",
                               repo=repo, payload={"title": title, "body": body},
                               need="Issues: write", replayable=False)
        return shapes.issue(answer, answer.data)

    def get_issue(self, repo: str, number: int) -> Issue:
        answer, _ = self._call("GET", f"/repos/{repo}/issues/{number}",
                               f"read issue #{number} on {repo}", repo=repo,
                               thing=f"issue #{number}", need="Issues: read")
        return shapes.issue(answer, answer.data)

    def edit_issue(self, repo: str, number: int, *, title: str | None = None,
                   body: str | None = None, state: str | None = None) -> Issue:
        payload = {k: v for k, v in (("title", title), ("body", body), ("state", state))
                   if v is not None}
        answer, _ = self._call("PATCH", f"/repos/{repo}/issues/{number}",
                               f"edit issue #{number} on {repo}", repo=repo, payload=payload,
                               thing=f"issue #{number}", need="Issues: write")
        return shapes.issue(answer, answer.data)

    def list_comments(self, repo: str, number: int) -> list[Comment]:
        answer, items = self._pages(f"/repos/{repo}/issues/{number}/comments",
                                    f"list the comments of #{number} on {repo}", repo=repo,
                                    thing=f"issue #{number}", need="Issues: read")
        return [shapes.comment(answer, v) for v in items]

    def create_comment(self, repo: str, number: int, body: str) -> Comment:
        answer, _ = self._call("POST", f"/repos/{repo}/issues/{number}/comments",
                               f"comment on #{number} on {repo}", repo=repo,
                               payload={"body": body}, thing=f"issue #{number}",
                               need="Issues: write", replayable=False)
        return shapes.comment(answer, answer.data)

    # -- the token -----------------------------------------------------------------------

    def current_user(self) -> User:
        answer, headers = self._call("GET", "/user", "read the token's user", repo="/user")
        return shapes.user(answer, headers)

    def can_push(self, repo: str) -> bool:
        return self._repo(repo)

    def _repo(self, repo: str) -> bool:
        """Read ``repo`` once: a missing repository is then one clear 404 line."""
        if repo not in self._repos:
            answer, _ = self._call("GET", f"/repos/{repo}", f"read repository {repo}", repo=repo)
            self._repos[repo] = shapes.can_push(answer)
        return self._repos[repo]


