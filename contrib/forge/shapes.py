"""GitHub's JSON answers, checked for shape and turned into contrib's value objects.

Nothing GitHub (or a proxy in front of GitHub Enterprise) sends is used before
it is checked here: a page that is not JSON, a list where an object belongs,
a field of the wrong type.  Each is one :class:`~contrib.forge.api.MalformedAnswer`
line naming the request and what came back, never a crash further on.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from contrib.forge.api import (
    ChecksSummary,
    Comment,
    FoundPr,
    Issue,
    MalformedAnswer,
    PrFile,
    PullRequest,
    ReviewState,
    User,
)
from contrib.secrets import scrub


def _glimpse(value: Any) -> str:
    text = repr(" ".join(value.split()) if isinstance(value, str) else value)
    return text if len(text) <= 60 else text[:57] + "..."


def describe(data: Any) -> str:
    """What came back, in a few words."""
    if data is None:
        return "an empty answer or null"
    if isinstance(data, dict) and isinstance(data.get("data"), str) and set(data) <= {"data", "url"}:
        page = data["data"].lstrip()
        kind = "an HTML page" if page[:1] == "<" else "text that is not JSON"
        return f"{kind} ({_glimpse(page)})"
    if isinstance(data, list):
        return f"a JSON list of {len(data)}"
    if isinstance(data, dict):
        return "a JSON object"
    return f"the JSON value {_glimpse(data)}"


class Answer:
    """One request's answer, checked field by field; errors name ``request``."""

    def __init__(self, request: str, data: Any) -> None:
        self.request = request
        self.data = data

    def fail(self, what: str) -> MalformedAnswer:
        """The one-line error for this answer."""
        return MalformedAnswer(scrub(
            f"GitHub's answer to {self.request} is not usable: {what}; if [github] api_url "
            "points at a proxy or a web page rather than the REST API, fix it, else try again"))

    def obj(self, value: Any, where: str = "the answer") -> dict[str, Any]:
        """``value`` (a part of the answer, or ``self.data``) as a JSON object."""
        if not isinstance(value, dict) or describe(value).startswith(("an HTML", "text")):
            raise self.fail(f"{where} is {describe(value)}, not a JSON object")
        return value

    def items(self) -> list[Any]:
        """The whole answer as a JSON list."""
        if not isinstance(self.data, list):
            raise self.fail(f"the answer is {describe(self.data)}, not a JSON list")
        return self.data

    def field(self, obj: dict[str, Any], key: str, kind: type | tuple[type, ...],
              *, optional: bool = False, where: str = "") -> Any:
        """``obj[key]`` of type ``kind`` (None allowed when ``optional``)."""
        value = obj.get(key)
        if value is None and optional:
            return None
        kinds = kind if isinstance(kind, tuple) else (kind,)
        wrong_bool = isinstance(value, bool) and bool not in kinds
        if not isinstance(value, kinds) or wrong_bool:
            name = "/".join(k.__name__ for k in kinds)
            got = "missing" if key not in obj else f"{_glimpse(value)}"
            raise self.fail(f"{where}{key} is {got}, expected {name}")
        return value

    def enum(self, obj: dict[str, Any], key: str, allowed: tuple[str, ...], where: str = "") -> str:
        """``obj[key]``, a string among ``allowed``."""
        value = self.field(obj, key, str, where=where)
        if value not in allowed:
            raise self.fail(f"{where}{key} is {_glimpse(value)}, expected one of {', '.join(allowed)}")
        return str(value)

    def timestamp(self, obj: dict[str, Any], key: str, where: str = "") -> str | None:
        """An ISO 8601 time, normalised to ``YYYY-MM-DDTHH:MM:SSZ``; None when null."""
        value = self.field(obj, key, str, optional=True, where=where)
        if value is None:
            return None
        try:
            return datetime.fromisoformat(value).strftime("%Y-%m-%dT%H:%M:%SZ")
        except ValueError:
            raise self.fail(f"{where}{key} is {_glimpse(value)}, expected a time") from None


def pull_request(answer: Answer, value: Any, at: str = "") -> PullRequest:
    """A PR object (the list endpoint's shape: ``merged`` is derived from ``merged_at``);
    ``at`` prefixes field names in messages ("pull request 3: ")."""
    data = answer.obj(value, at.removesuffix(": ") or "the answer")
    head = answer.obj(data.get("head"), f"{at}head")
    base = answer.obj(data.get("base"), f"{at}base")
    merged_at = answer.timestamp(data, "merged_at", at)
    sha = answer.field(data, "merge_commit_sha", str, optional=True, where=at)
    return PullRequest(
        number=answer.field(data, "number", int, where=at),
        url=answer.field(data, "html_url", str, where=at),
        state=answer.enum(data, "state", ("open", "closed"), at),
        merged=merged_at is not None,
        merged_at=merged_at,
        merge_commit_sha=sha if merged_at else None,
        title=answer.field(data, "title", str, optional=True, where=at) or "",
        body=answer.field(data, "body", str, optional=True, where=at) or "",
        head=answer.field(head, "label", str, where=f"{at}head."),
        base=answer.field(base, "ref", str, where=f"{at}base."),
        draft=bool(answer.field(data, "draft", bool, optional=True, where=at)),
        head_sha=answer.field(head, "sha", str, optional=True, where=f"{at}head."),
    )


def item_label(kind: str, value: Any) -> str:
    """ "pull request 3: " for the messages about one item of a list."""
    number = value.get("number", "?") if isinstance(value, dict) else "?"
    return f"{kind} {_glimpse(number)}: "


def issue(answer: Answer, value: Any, at: str = "") -> Issue:
    """An issue object."""
    data = answer.obj(value, at.removesuffix(": ") or "the answer")
    return Issue(
        number=answer.field(data, "number", int, where=at),
        url=answer.field(data, "html_url", str, where=at),
        state=answer.enum(data, "state", ("open", "closed"), at),
        title=answer.field(data, "title", str, optional=True, where=at) or "",
        body=answer.field(data, "body", str, optional=True, where=at) or "",
    )


def found_pr(answer: Answer, value: Any, at: str = "") -> FoundPr:
    """A pull request as a search result (an issue-shaped item) finds it."""
    found = issue(answer, value, at)
    user = answer.obj(answer.obj(value).get("user"), f"{at}user")
    return FoundPr(found.number, found.url, found.state, found.title, found.body,
                   answer.field(user, "login", str, where=f"{at}user."))


def pr_file(answer: Answer, value: Any) -> PrFile:
    """One entry of a pull request's files."""
    data = answer.obj(value, "a pull request file")
    return PrFile(filename=answer.field(data, "filename", str, where="file "),
                  status=answer.field(data, "status", str, optional=True, where="file ") or "",
                  patch=answer.field(data, "patch", str, optional=True, where="file "))


def is_pull_request(answer: Answer, value: Any) -> bool:
    """GitHub lists PRs among issues, marked by a ``pull_request`` key."""
    return answer.obj(value, "an issue").get("pull_request") is not None


def comment(answer: Answer, value: Any) -> Comment:
    """A comment object."""
    data = answer.obj(value, "the answer" if value is answer.data else "a comment")
    user = answer.obj(data.get("user"), "comment user")
    return Comment(
        id=answer.field(data, "id", int),
        url=answer.field(data, "html_url", str),
        body=answer.field(data, "body", str, optional=True) or "",
        user=answer.field(user, "login", str, where="user."),
    )


def user(answer: Answer, headers: dict[str, Any]) -> User:
    """``GET /user`` with its ``X-OAuth-Scopes`` header (absent: fine-grained token)."""
    data = answer.obj(answer.data)
    raw = headers.get("x-oauth-scopes")
    scopes = None if raw is None else tuple(s.strip() for s in str(raw).split(",") if s.strip())
    return User(login=answer.field(data, "login", str), scopes=scopes)


def can_push(answer: Answer) -> bool:
    """``permissions.push`` of a repository object (absent: no push)."""
    data = answer.obj(answer.data)
    permissions = answer.field(data, "permissions", dict, optional=True) or {}
    return bool(answer.field(permissions, "push", bool, optional=True, where="permissions."))


PASSED_CONCLUSIONS = ("success", "neutral", "skipped")


def check_run_verdict(answer: Answer, value: Any) -> str:
    """"passed", "failed" or "pending" for one check run."""
    run = answer.obj(value, "a check run")
    status = answer.field(run, "status", str, where="check run ")
    if status != "completed":
        return "pending"
    conclusion = answer.field(run, "conclusion", str, optional=True, where="check run ")
    return "passed" if conclusion in PASSED_CONCLUSIONS else "failed"


def status_verdicts(answer: Answer) -> list[str]:
    """One verdict per context of a combined commit status."""
    data = answer.obj(answer.data)
    statuses = answer.field(data, "statuses", list)
    verdicts = []
    for value in statuses:
        state = answer.enum(answer.obj(value, "a status"), "state",
                            ("success", "failure", "error", "pending"), "status ")
        verdicts.append({"success": "passed", "pending": "pending"}.get(state, "failed"))
    return verdicts


def summary(verdicts: list[str]) -> ChecksSummary:
    """The counts of every check and status together."""
    return ChecksSummary.count(verdicts)


def review_decision(answer: Answer, reviews: list[Any]) -> ReviewState:
    """Each reviewer's latest approving, blocking or dismissed review decides."""
    latest: dict[str, str] = {}
    for value in reviews:
        review = answer.obj(value, "a review")
        state = answer.field(review, "state", str, where="review ")
        reviewer = answer.obj(review.get("user"), "review user")
        login = answer.field(reviewer, "login", str, where="review user.")
        if state in ("APPROVED", "CHANGES_REQUESTED", "DISMISSED"):
            latest[login] = state
    if "CHANGES_REQUESTED" in latest.values():
        return ReviewState.CHANGES_REQUESTED
    if "APPROVED" in latest.values():
        return ReviewState.APPROVED
    return ReviewState.REVIEW_REQUIRED
