"""The small GitHub interface open-pr needs, and its PyGithub implementation.

Commands receive a :class:`GitHubAPI` (ghstack keeps the same split between an
interface, the real client and a fake); tests run the real
:class:`PyGithubAPI` against a fake GitHub HTTP server.  Every failure leaves
this module as one :class:`~contrib.errors.GitHubError` line that says what
to do, scrubbed of the token.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Protocol

import requests
from github import Auth, Github, GithubException, GithubRetry
from github.GithubException import RateLimitExceededExceedsMaxWait

from contrib.errors import GitHubError
from contrib.secrets import register_secret, scrub

DEFAULT_API_URL = "https://api.github.com"


class PullRequestExists(GitHubError):
    """GitHub answered 422 "A pull request already exists": find it and update it."""


class GitHubUnavailable(GitHubError):
    """5xx after retries, a timeout or a network failure: the request may have landed."""


@dataclass(frozen=True)
class PullRequest:
    """What contrib needs to know about one pull request."""

    number: int
    url: str  # the html_url a human opens
    state: str  # "open" or "closed"
    merged: bool
    merged_at: str | None  # ISO 8601, UTC
    merge_commit_sha: str | None
    title: str
    body: str
    head: str  # label, "owner:branch"
    base: str  # branch name in the upstream repository
    draft: bool
    head_sha: str | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict of every field."""
        return asdict(self)


class GitHubAPI(Protocol):
    """The pull-request operations contrib performs; ``repo`` is ``owner/name``."""

    def find_pr(self, repo: str, head: str, base: str) -> PullRequest | None:
        """The PR from ``head`` (``owner:branch``) into ``base``, any state; the open
        one if several, else the newest; None if there is none."""
        ...

    def create_draft_pr(
        self, repo: str, *, head: str, base: str, title: str, body: str,
        maintainer_can_modify: bool = True,
    ) -> PullRequest:
        """Open a draft PR; raises PullRequestExists when GitHub has one for head."""
        ...

    def update_pr(self, repo: str, number: int, *, title: str, body: str) -> PullRequest:
        """Replace the title and body of PR ``number``."""
        ...

    def reopen_pr(self, repo: str, number: int) -> PullRequest:
        """Reopen the closed, unmerged PR ``number``."""
        ...

    def get_pr(self, repo: str, number: int) -> PullRequest:
        """PR ``number`` as GitHub has it now."""
        ...


GitHubFactory = Callable[[str, str], GitHubAPI]
"""Builds a GitHubAPI from (api_url, token); commands take one so tests can choose."""


class _BoundedRetry(GithubRetry):
    """GithubRetry whose Retry-After sleeps never exceed ``max_wait`` seconds.

    A server may ask for hours (urllib3 allows 6 h by default); contrib would
    rather fail with a clear rate-limit message than hang.
    """

    def __init__(self, max_wait: float = 60.0, **kwargs: Any) -> None:
        self.max_wait = max_wait
        super().__init__(**kwargs)

    def new(self, **kw: Any) -> _BoundedRetry:
        kw["max_wait"] = self.max_wait
        retry: _BoundedRetry = super().new(**kw)
        return retry

    def parse_retry_after(self, retry_after: str) -> float:
        return float(min(super().parse_retry_after(retry_after), self.max_wait))


def make_retry(*, retries: int = 5, max_wait: float = 60.0, backoff: float = 1.0) -> GithubRetry:
    """GithubRetry for 5xx and rate limits; total sleeping stays under retries * max_wait."""
    return _BoundedRetry(
        max_wait=max_wait,
        total=retries,
        backoff_factor=backoff,
        backoff_max=max_wait,
        secondary_rate_wait=min(60.0, max_wait),
        max_rate_limit_wait=max_wait,
    )


class _ScrubLogs(logging.Filter):
    """PyGithub logs retries to stderr ("Retrying after 1 seconds"); scrub them too."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = scrub(record.getMessage()), None
        return True


def _scrub_pygithub_logs() -> None:
    for handler in logging.getLogger("github").handlers:
        if not any(isinstance(f, _ScrubLogs) for f in handler.filters):
            handler.addFilter(_ScrubLogs())


class PyGithubAPI:
    """GitHubAPI over PyGithub: ``Auth.Token``, ``GithubRetry``, ``base_url``.

    ``retries``/``max_wait``/``backoff`` bound the time spent retrying;
    ``write_interval`` is PyGithub's pause between writes (GitHub asks for one
    second to avoid secondary rate limits; tests pass 0).
    """

    def __init__(
        self,
        api_url: str,
        token: str,
        *,
        retries: int = 5,
        max_wait: float = 60.0,
        backoff: float = 1.0,
        timeout: int = 30,
        write_interval: float = 1.0,
    ) -> None:
        register_secret(token)
        _scrub_pygithub_logs()
        self.api_url = (api_url or DEFAULT_API_URL).rstrip("/")
        self._gh = Github(
            auth=Auth.Token(token),
            base_url=self.api_url,
            timeout=timeout,
            retry=make_retry(retries=retries, max_wait=max_wait, backoff=backoff),
            seconds_between_requests=None,
            seconds_between_writes=write_interval or None,
        )
        self._repos: dict[str, Any] = {}

    def _repo(self, repo: str) -> Any:
        if repo not in self._repos:
            with self._errors(repo, f"read repository {repo}"):
                self._repos[repo] = self._gh.get_repo(repo)
        return self._repos[repo]

    def find_pr(self, repo: str, head: str, base: str) -> PullRequest | None:
        gh_repo = self._repo(repo)
        with self._errors(repo, f"list pull requests of {repo}"):
            found = [_convert(p) for p in gh_repo.get_pulls(state="all", head=head, base=base)]
        if not found:
            return None
        found.sort(key=lambda p: (p.state == "open", p.number), reverse=True)
        return found[0]

    def create_draft_pr(
        self, repo: str, *, head: str, base: str, title: str, body: str,
        maintainer_can_modify: bool = True,
    ) -> PullRequest:
        gh_repo = self._repo(repo)
        with self._errors(repo, f"create a pull request on {repo}"):
            pr = gh_repo.create_pull(
                base=base, head=head, title=title, body=body, draft=True,
                maintainer_can_modify=maintainer_can_modify,
            )
            return _convert(pr)

    def update_pr(self, repo: str, number: int, *, title: str, body: str) -> PullRequest:
        gh_repo = self._repo(repo)
        with self._errors(repo, f"update pull request #{number} on {repo}", number):
            pr = gh_repo.get_pull(number)
            pr.edit(title=title, body=body)
            return _convert(pr)

    def reopen_pr(self, repo: str, number: int) -> PullRequest:
        gh_repo = self._repo(repo)
        with self._errors(repo, f"reopen pull request #{number} on {repo}", number):
            pr = gh_repo.get_pull(number)
            pr.edit(state="open")
            return _convert(pr)

    def get_pr(self, repo: str, number: int) -> PullRequest:
        gh_repo = self._repo(repo)
        with self._errors(repo, f"read pull request #{number} on {repo}", number):
            return _convert(gh_repo.get_pull(number))

    @contextmanager
    def _errors(self, repo: str, action: str, number: int | None = None) -> Iterator[None]:
        try:
            yield
        except GithubException as e:
            raise github_error(e, repo=repo, action=action, number=number) from None
        except requests.exceptions.RequestException as e:
            raise network_error(e, self.api_url, action) from None


def _convert(pr: Any) -> PullRequest:
    """PyGithub PullRequest -> PullRequest, touching only fields the list endpoint
    returns (``merged`` would cost a second request per PR, so derive it)."""
    merged_at: datetime | None = pr.merged_at
    return PullRequest(
        number=pr.number,
        url=pr.html_url,
        state=pr.state,
        merged=merged_at is not None,
        merged_at=merged_at.strftime("%Y-%m-%dT%H:%M:%SZ") if merged_at else None,
        merge_commit_sha=pr.merge_commit_sha if merged_at else None,
        title=pr.title or "",
        body=pr.body or "",
        head=pr.head.label,
        base=pr.base.ref,
        draft=bool(pr.draft),
        head_sha=pr.head.sha,
    )


def _message(e: GithubException) -> str:
    data = e.data if isinstance(e.data, dict) else {}
    return str(data.get("message") or e.message or "no message")


def _errors_text(e: GithubException) -> str:
    data = e.data if isinstance(e.data, dict) else {}
    parts = []
    for err in data.get("errors") or []:
        if isinstance(err, dict):
            parts.append(err.get("message") or f"{err.get('field', '?')} {err.get('code', 'invalid')}")
        else:
            parts.append(str(err))
    return "; ".join(str(p) for p in parts)


def _is_rate_limit(e: GithubException) -> bool:
    msg = _message(e).lower()
    return isinstance(e, RateLimitExceededExceedsMaxWait) or "rate limit" in msg


def github_error(
    e: GithubException, *, repo: str, action: str, number: int | None = None
) -> GitHubError:
    """One clear, scrubbed line for a PyGithub exception raised while doing ``action``."""
    status, msg = e.status, _message(e)
    if status == 401:
        text = f"GitHub rejected the token (401 {msg}): set GITHUB_TOKEN to a valid token"
    elif status in (403, 429) and _is_rate_limit(e):
        text = f"GitHub rate limit hit while trying to {action} ({status} {msg}): try again later"
    elif status == 403:
        text = f"token lacks Pull requests: write on {repo} ({status} {msg}): could not {action}"
    elif status == 404 and number is not None:
        text = f"pull request #{number} not found on {repo} (404): could not {action}"
    elif status == 404:
        text = f"{repo} not found or the token cannot see it (404): check [upstreams] github/fork"
    elif status == 422:
        detail = _errors_text(e)
        if "already exists" in detail:
            return PullRequestExists(scrub(f"{action}: {detail}"))
        text = f"GitHub refused to {action} (422 {msg}{': ' + detail if detail else ''})"
    elif status >= 500:
        return GitHubUnavailable(scrub(f"GitHub failed to {action} ({status} {msg}): try again later"))
    else:
        text = f"GitHub answered {status} {msg} while trying to {action}"
    return GitHubError(scrub(text))


def network_error(e: requests.exceptions.RequestException, api_url: str, action: str) -> GitHubError:
    """One clear line for a network failure, a timeout or exhausted 5xx retries."""
    if isinstance(e, requests.exceptions.RetryError) and "too many 403" in str(e):
        # The network is fine here: advice about it would send the user the wrong way.
        return GitHubUnavailable(scrub(
            f"could not {action} at {api_url}: it kept answering 403 rate limit "
            "(Retry-After) after retries; try again later"))
    if isinstance(e, requests.exceptions.RetryError):
        why = "it kept answering 5xx after retries"
    elif isinstance(e, requests.exceptions.Timeout) or "timed out" in str(e).lower():
        why = "the request timed out"
    elif isinstance(e, requests.exceptions.ConnectionError):
        why = "could not connect"
    else:
        why = type(e).__name__
    return GitHubUnavailable(
        scrub(f"could not {action} at {api_url}: {why}; check the network or [github] api_url")
    )
