"""The forge: pull requests, issues, comments, checks and reviews behind one interface.

Commands receive a :class:`Forge` and never build REST paths themselves.
Two implementations exist (ghstack's ``github.py`` / ``github_real.py`` /
``github_fake.py`` split):

- :class:`contrib.forge.github.GitHubForge`: GitHub over PyGithub (``Auth.Token``,
  ``GithubRetry``, ``base_url``), every answer checked for shape;
- :class:`contrib.forge.recording.RecordingForge`: reads go to a real forge (or find
  nothing without a token), writes are recorded and answered with plausible
  objects.  It *is* every ``--dry-run``.

A GitLab backend is one more module implementing :class:`Forge`, chosen in
:func:`connect`.  Every failure leaves a forge as one
:class:`~contrib.errors.GitHubError` line (exit 1) naming the request, scrubbed
of the token; bad configuration is a :class:`~contrib.errors.ConfigError`
(exit 2).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from contrib.errors import ConfigError, GitHubError

if TYPE_CHECKING:
    pass

DEFAULT_API_URL = "https://api.github.com"


# -- errors ---------------------------------------------------------------------------


class PullRequestExists(GitHubError):
    """The forge answered "A pull request already exists": find it and update it."""


class ForgeUnavailable(GitHubError):
    """5xx after retries, a timeout or a network failure: a write may have landed."""


ForgeUnavailable = ForgeUnavailable  # the name open-pr's callers know


class MalformedAnswer(GitHubError):
    """The forge answered, but not with what the request must return (HTML, bad JSON,
    a wrong shape, wrongly typed fields, a redirect loop)."""


class RateLimited(GitHubError):
    """The forge asked to wait longer than contrib waits; ``retry_at`` says until when."""

    def __init__(self, message: str, *, retry_at: str | None = None) -> None:
        super().__init__(message)
        self.retry_at = retry_at


# -- value objects ----------------------------------------------------------------------


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


@dataclass(frozen=True)
class FoundPr:
    """One pull request as the search API finds it (an issue-shaped item)."""

    number: int
    url: str  # html_url
    state: str  # "open" or "closed"
    title: str
    body: str
    user: str  # login of the author

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict of every field."""
        return asdict(self)


@dataclass(frozen=True)
class PrFile:
    """One file a pull request changes, with its unified diff (None for a binary or a
    diff too large for GitHub to show)."""

    filename: str
    status: str  # added, removed, modified, renamed, ...
    patch: str | None

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict of every field."""
        return asdict(self)


@dataclass(frozen=True)
class Issue:
    """One issue (never a pull request, although GitHub lists both as issues)."""

    number: int
    url: str  # html_url
    state: str  # "open" or "closed"
    title: str
    body: str

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict of every field."""
        return asdict(self)


@dataclass(frozen=True)
class Comment:
    """One comment on an issue or a pull request's conversation."""

    id: int
    url: str  # html_url
    body: str
    user: str  # login of the author

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict of every field."""
        return asdict(self)


@dataclass(frozen=True)
class User:
    """Who the token belongs to, and what it may do.

    ``scopes`` is the ``X-OAuth-Scopes`` header of ``GET /user`` split on
    commas; None when the header is absent (fine-grained tokens and GitHub App
    tokens carry no scopes: their permissions are per repository).
    """

    login: str
    scopes: tuple[str, ...] | None

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict of every field."""
        return {"login": self.login, "scopes": None if self.scopes is None else list(self.scopes)}


class CheckState(StrEnum):
    """The combined verdict of a commit's CI."""

    SUCCESS = "success"  # every check passed
    FAILURE = "failure"  # at least one failed
    PENDING = "pending"  # none failed, at least one still running or queued
    NONE = "none"  # no check reported at all


@dataclass(frozen=True)
class ChecksSummary:
    """A commit's check runs and commit statuses, counted together."""

    total: int
    passed: int
    failed: int
    pending: int
    state: CheckState

    @classmethod
    def count(cls, verdicts: list[str]) -> ChecksSummary:
        """From one verdict per check, each "passed", "failed" or "pending"."""
        passed, failed = verdicts.count("passed"), verdicts.count("failed")
        pending = len(verdicts) - passed - failed
        state = (CheckState.FAILURE if failed else CheckState.PENDING if pending
                 else CheckState.SUCCESS if passed else CheckState.NONE)
        return cls(len(verdicts), passed, failed, pending, state)

    def text(self) -> str:
        """Short human form: ``3/4 passed, 1 failed``; ``no checks``."""
        if self.total == 0:
            return "no checks"
        parts = [f"{self.passed}/{self.total} passed"]
        if self.failed:
            parts.append(f"{self.failed} failed")
        if self.pending:
            parts.append(f"{self.pending} pending")
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict of every field."""
        return {**asdict(self), "state": str(self.state)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ChecksSummary:
        """The inverse of :meth:`to_json`."""
        return cls(int(data["total"]), int(data["passed"]), int(data["failed"]),
                   int(data["pending"]), CheckState(data["state"]))


class ReviewState(StrEnum):
    """A pull request's review decision, as GitHub shows it on the PR page."""

    APPROVED = "approved"
    CHANGES_REQUESTED = "changes_requested"
    REVIEW_REQUIRED = "review_required"  # nobody approved or asked for changes yet


@dataclass(frozen=True)
class RecordedCall:
    """One request a :class:`~contrib.forge.recording.RecordingForge` was asked to make."""

    method: str  # GET, POST, PATCH
    path: str  # the REST path, e.g. /repos/OWNER/NAME/pulls
    summary: str  # what the payload says, in a few words (never a body's full text)
    write: bool
    note: str = ""  # e.g. "skipped: no token"

    def __str__(self) -> str:
        text = f"{self.method} {self.path}"
        text += f" {self.summary}" if self.summary else ""
        return text + (f" ({self.note})" if self.note else "")

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict of every field."""
        return asdict(self)


# -- the interface ----------------------------------------------------------------------


class Forge(Protocol):
    """What contrib asks of a code forge; ``repo`` is always ``owner/name``.

    Every method raises :class:`~contrib.errors.GitHubError` (or a subclass
    above) on failure, with one line naming the request.
    """

    api_url: str

    # pull requests
    def find_pr(self, repo: str, head: str, base: str) -> PullRequest | None:
        """The PR from ``head`` (``owner:branch``) into ``base``, any state: the open
        one if several, else the newest; None if there is none."""
        ...

    def create_draft_pr(self, repo: str, *, head: str, base: str, title: str, body: str,
                        maintainer_can_modify: bool = True) -> PullRequest:
        """Open a draft PR; raises PullRequestExists when the forge has one for head."""
        ...

    def update_pr(self, repo: str, number: int, *, title: str, body: str) -> PullRequest:
        """Replace the title and body of PR ``number``."""
        ...

    def reopen_pr(self, repo: str, number: int) -> PullRequest:
        """Reopen the closed, unmerged PR ``number``."""
        ...

    def get_pr(self, repo: str, number: int) -> PullRequest:
        """PR ``number`` as the forge has it now."""
        ...

    def review_state(self, repo: str, number: int) -> ReviewState:
        """The review decision of PR ``number``: each reviewer's latest review counts."""
        ...

    def checks(self, repo: str, sha: str) -> ChecksSummary:
        """CI of commit ``sha``: its check runs and its combined commit status together."""
        ...

    def search_prs(self, repo: str, words: str) -> list[FoundPr]:
        """The open PRs of ``repo`` whose text matches ``words`` (GitHub's search syntax:
        ``a b`` both, ``a OR b`` either), through the search API (all pages)."""
        ...

    def pr_files(self, repo: str, number: int) -> list[PrFile]:
        """The files PR ``number`` changes, each with its diff (all pages)."""
        ...

    # issues and comments
    def list_issues(self, repo: str) -> list[Issue]:
        """Every issue of ``repo`` in every state (all pages), pull requests left out."""
        ...

    def create_issue(self, repo: str, *, title: str, body: str) -> Issue:
        """Open a new issue.  Never retried after a 5xx or a timeout, which may have
        landed: on ForgeUnavailable list the issues before creating again."""
        ...

    def get_issue(self, repo: str, number: int) -> Issue:
        """Issue ``number`` as the forge has it now."""
        ...

    def edit_issue(self, repo: str, number: int, *, title: str | None = None,
                   body: str | None = None, state: str | None = None) -> Issue:
        """Change the given fields of issue ``number`` (``state``: "open" reopens)."""
        ...

    def list_comments(self, repo: str, number: int) -> list[Comment]:
        """Every comment on issue or PR ``number``, oldest first (all pages)."""
        ...

    def create_comment(self, repo: str, number: int, body: str) -> Comment:
        """Comment on issue or PR ``number``.  Never retried after a 5xx or a timeout
        (see create_issue): on ForgeUnavailable list the comments before trying again."""
        ...

    # the token
    def current_user(self) -> User:
        """Who the token belongs to, with its OAuth scopes (``GET /user``)."""
        ...

    def can_push(self, repo: str) -> bool:
        """Whether the token may push to ``repo`` (its ``permissions.push``)."""
        ...


ForgeFactory = Callable[[str, str], Forge]
"""Builds a Forge from (api_url, token); commands take one so tests can choose."""


# -- construction: the one place a forge is made from config and token ----------------------


def check_api_url(url: str, where: str) -> str:
    """``url`` without a trailing slash, or ConfigError naming ``where`` (the key).

    urllib raises bare ValueErrors for a port out of range or a broken IPv6
    literal only when the URL is used; check here so the user hears which key.
    """
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises ValueError for a bad port
    except ValueError as exc:
        raise ConfigError(f"{where}: {url!r} is not a usable URL ({exc}); write it as "
                          "https://HOST[:PORT][/PATH], e.g. https://api.github.com") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{where}: {url!r} must be an http(s) URL with a host, "
                          "e.g. https://api.github.com")
    return url.rstrip("/")


def check_token(token: str) -> str:
    """``token``, or ContribError (exit 2) when HTTP headers cannot carry it."""
    if all(32 < ord(c) < 256 and c != "\x7f" for c in token):
        return token
    source = next((v for v in ("GITHUB_TOKEN", "GH_TOKEN")
                   if os.environ.get(v, "").strip() == token), "gh auth token")
    what = ("that are not Latin-1" if any(ord(c) > 255 for c in token)
            else "that are spaces or control characters")
    raise ConfigError(f"the GitHub token from {source} contains characters {what}, which no "
                      "HTTP header can carry (a paste gone wrong?): copy the token again")
