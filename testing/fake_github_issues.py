"""The fake GitHub's issues, comments, checks, statuses, reviews and ``GET /user``.

A mixin of :class:`testing.fake_github.FakeGitHub`, kept apart so each file
stays readable.  Shapes and error bodies follow GitHub's REST API:

- ``GET /user`` (with ``X-OAuth-Scopes`` unless ``scopes`` is None)
- ``GET``/``POST /repos/{o}/{r}/issues`` (``state``, pagination; PRs listed
  too, marked by ``pull_request``), ``GET``/``PATCH /repos/{o}/{r}/issues/{n}``
- ``GET``/``POST /repos/{o}/{r}/issues/{n}/comments``
- ``GET /repos/{o}/{r}/commits/{sha}/check-runs`` and ``.../status``
- ``GET /repos/{o}/{r}/pulls/{n}/reviews``
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from testing.fake_github_base import PR, RecordedRequest, Repo, not_found, now, validation_failed

ISSUES_DOC = "https://docs.github.com/rest/issues/issues"
Answer = tuple[int, dict[str, str], Any]


@dataclass
class FakeIssue:
    repo: str
    number: int
    id: int
    title: str
    body: str | None
    user: str
    created_at: str
    updated_at: str
    state: str = "open"
    closed_at: str | None = None
    state_reason: str | None = None


@dataclass
class FakeComment:
    id: int
    body: str
    user: str
    created_at: str


@dataclass
class CommitChecks:
    runs: list[dict[str, Any]] = field(default_factory=list)
    statuses: dict[str, str] = field(default_factory=dict)  # context -> state (latest)


class IssueEndpoints:
    """State and routes for issues & co; FakeGitHub provides the helpers used here."""

    login: str
    scopes: str | None
    _issues: dict[str, list[FakeIssue]]
    _comments: dict[tuple[str, int], list[FakeComment]]
    _checks: dict[tuple[str, str], CommitChecks]
    _reviews: dict[tuple[str, int], list[dict[str, Any]]]

    # provided by FakeGitHub
    _ids: Any
    _prs: dict[str, list[PR]]
    url: str

    _lock: Any

    def _repo(self, full_name: str) -> Repo: ...
    def _find(self, repo: str, number: int) -> PR: ...
    def _user_json(self, login: str) -> dict[str, Any]: ...
    def _paginate(self, req: RecordedRequest, items: list[Any]) -> Answer: ...
    def _next_number(self, repo: str) -> int: ...

    def _init_issue_state(self) -> None:
        self._issues, self._comments, self._checks, self._reviews = {}, {}, {}, {}

    # -- state helpers for tests ----------------------------------------------------------

    def add_issue(self, repo: str, title: str, body: str = "", *, state: str = "open",
                  user: str | None = None) -> int:
        """Make an issue exist without an HTTP request (fast bulk setup); its number."""
        with self._lock:
            issue = FakeIssue(repo, self._next_number(repo), next(self._ids), title, body,
                              user or self.login, now(), now(), state)
            if state == "closed":
                issue.closed_at, issue.state_reason = now(), "completed"
            self._issues.setdefault(repo, []).append(issue)
            return issue.number

    def issues(self, repo: str) -> list[dict[str, Any]]:
        """Every issue of ``repo`` (not PRs) as ``GET .../issues/{n}`` renders it."""
        with self._lock:
            return [self._issue_json(i) for i in self._issues.get(repo, [])]

    def comments(self, repo: str, number: int) -> list[dict[str, Any]]:
        """Every comment on issue or PR ``number``, oldest first."""
        with self._lock:
            return [self._comment_json(repo, number, c) for c in self._comments.get((repo, number), [])]

    def add_check_run(self, repo: str, sha: str, name: str, *, status: str = "completed",
                      conclusion: str | None = "success") -> None:
        """A check run on commit ``sha`` (``status``: queued/in_progress/completed)."""
        with self._lock:
            checks = self._checks.setdefault((repo, sha), CommitChecks())
            checks.runs.append({"id": next(self._ids), "name": name, "head_sha": sha,
                                "status": status,
                                "conclusion": conclusion if status == "completed" else None})

    def set_status(self, repo: str, sha: str, context: str, state: str) -> None:
        """A commit status (success/failure/error/pending); the latest per context counts."""
        with self._lock:
            self._checks.setdefault((repo, sha), CommitChecks()).statuses[context] = state

    def add_review(self, repo: str, number: int, login: str, state: str) -> None:
        """A submitted review (APPROVED, CHANGES_REQUESTED, COMMENTED, DISMISSED)."""
        with self._lock:
            reviews = self._reviews.setdefault((repo, number), [])
            reviews.append({"id": next(self._ids), "user": self._user_json(login), "state": state,
                            "body": "", "submitted_at": "2026-11-30T12:00:00Z",
                            "commit_id": "0" * 40})

    # -- routing --------------------------------------------------------------------------

    def _route_more(self, req: RecordedRequest) -> Answer | None:
        """Answer the endpoints of this module; None when the path is not one of them."""
        if req.path == "/user" and req.method == "GET":
            headers = {} if self.scopes is None else {"X-OAuth-Scopes": self.scopes}
            return 200, headers, self._user_json(self.login)
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/(issues|commits|pulls)/(.+)", req.path) or \
            re.fullmatch(r"/repos/([^/]+/[^/]+)/(issues)()", req.path)
        if m is None:
            return None
        repo = self._repo(m.group(1)).full_name
        kind, rest = m.group(2), m.group(3)
        if kind == "issues":
            return self._route_issues(req, repo, rest)
        if kind == "commits":
            return self._route_commit(req, repo, rest)
        r = re.fullmatch(r"(\d+)/reviews", rest)
        if r is None or req.method != "GET":
            return None
        self._find(repo, int(r.group(1)))
        return self._paginate(req, list(self._reviews.get((repo, int(r.group(1))), [])))

    def _route_issues(self, req: RecordedRequest, repo: str, rest: str) -> Answer | None:
        if rest == "":
            if req.method == "GET":
                return self._list_issues(req, repo)
            if req.method == "POST":
                return 201, {}, self._create_issue(repo, req.json() or {})
            return None
        m = re.fullmatch(r"(\d+)(/comments)?", rest)
        if m is None:
            raise not_found(ISSUES_DOC)
        number = int(m.group(1))
        if m.group(2):
            self._issue_or_pr_json(repo, number)  # 404 when neither exists
            if req.method == "GET":
                return self._paginate(req, self.comments(repo, number))
            if req.method == "POST":
                return 201, {}, self._add_comment(repo, number, req.json() or {})
            return None
        if req.method == "GET":
            return 200, {}, self._issue_or_pr_json(repo, number)
        if req.method == "PATCH":
            return 200, {}, self._edit_issue(repo, number, req.json() or {})
        return None

    def _route_commit(self, req: RecordedRequest, repo: str, rest: str) -> Answer | None:
        m = re.fullmatch(r"([0-9a-f]{7,40})/(check-runs|status)", rest)
        if m is None or req.method != "GET":
            return None
        checks = self._checks.get((repo, m.group(1)), CommitChecks())
        if m.group(2) == "check-runs":
            status, headers, page = self._paginate(req, list(checks.runs))
            return status, headers, {"total_count": len(checks.runs), "check_runs": page}
        statuses = [{"context": c, "state": s, "description": None, "target_url": None}
                    for c, s in checks.statuses.items()]
        states = set(checks.statuses.values())
        combined = ("failure" if states & {"failure", "error"} else
                    "pending" if "pending" in states or not states else "success")
        return 200, {}, {"state": combined, "statuses": statuses, "sha": m.group(1),
                         "total_count": len(statuses)}

    # -- issues ---------------------------------------------------------------------------

    def _list_issues(self, req: RecordedRequest, repo: str) -> Answer:
        state = req.query.get("state", "open")
        everything = [self._issue_json(i) for i in self._issues.get(repo, [])]
        everything += [self._pr_as_issue(p) for p in self._prs.get(repo, [])]
        found = [i for i in everything if state == "all" or i["state"] == state]
        found.sort(key=lambda i: -int(i["number"]))  # newest first, as GitHub sorts
        return self._paginate(req, found)

    def _create_issue(self, repo: str, data: dict[str, Any]) -> dict[str, Any]:
        if not data.get("title"):
            raise validation_failed([{"resource": "Issue", "code": "missing_field",
                                       "field": "title"}], f"{ISSUES_DOC}#create-an-issue")
        number = self.add_issue(repo, str(data["title"]), data.get("body"))
        return self._issue_json(self._find_issue(repo, number))

    def _edit_issue(self, repo: str, number: int, data: dict[str, Any]) -> dict[str, Any]:
        issue = self._find_issue(repo, number)
        if "state" in data and data["state"] not in ("open", "closed"):
            raise validation_failed([{"resource": "Issue", "field": "state", "code": "invalid"}],
                                     f"{ISSUES_DOC}#update-an-issue")
        if data.get("state") == "closed" and issue.state == "open":
            issue.state, issue.closed_at, issue.state_reason = "closed", now(), "completed"
        elif data.get("state") == "open" and issue.state == "closed":
            issue.state, issue.closed_at, issue.state_reason = "open", None, "reopened"
        if "title" in data:
            issue.title = str(data["title"])
        if "body" in data:
            issue.body = data["body"]
        issue.updated_at = now()
        return self._issue_json(issue)

    def _find_issue(self, repo: str, number: int) -> FakeIssue:
        for issue in self._issues.get(repo, []):
            if issue.number == number:
                return issue
        raise not_found(f"{ISSUES_DOC}#get-an-issue")

    def _issue_or_pr_json(self, repo: str, number: int) -> dict[str, Any]:
        if any(p.number == number for p in self._prs.get(repo, [])):
            return self._pr_as_issue(self._find(repo, number))
        return self._issue_json(self._find_issue(repo, number))

    def _add_comment(self, repo: str, number: int, data: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(data.get("body"), str) or not data["body"]:
            raise validation_failed([{"resource": "IssueComment", "code": "missing_field",
                                       "field": "body"}], f"{ISSUES_DOC}#create-an-issue-comment")
        comment = FakeComment(next(self._ids), data["body"], self.login, now())
        self._comments.setdefault((repo, number), []).append(comment)
        return self._comment_json(repo, number, comment)

    # -- JSON shapes ------------------------------------------------------------------------

    def _issue_json(self, issue: FakeIssue) -> dict[str, Any]:
        return {
            "url": f"{self.url}/repos/{issue.repo}/issues/{issue.number}", "id": issue.id,
            "node_id": f"I_{issue.id}", "number": issue.number, "title": issue.title,
            "user": self._user_json(issue.user), "labels": [], "state": issue.state,
            "state_reason": issue.state_reason, "locked": False, "assignee": None,
            "assignees": [], "comments": len(self._comments.get((issue.repo, issue.number), [])),
            "created_at": issue.created_at, "updated_at": issue.updated_at,
            "closed_at": issue.closed_at, "body": issue.body,
            "html_url": f"https://github.com/{issue.repo}/issues/{issue.number}",
            "author_association": "OWNER",
        }

    def _pr_as_issue(self, pr: PR) -> dict[str, Any]:
        data = self._issue_json(FakeIssue(pr.repo, pr.number, pr.id, pr.title, pr.body, pr.user,
                                          pr.created_at, pr.updated_at, pr.state, pr.closed_at))
        data["html_url"] = f"https://github.com/{pr.repo}/pull/{pr.number}"
        data["pull_request"] = {"url": f"{self.url}/repos/{pr.repo}/pulls/{pr.number}",
                                "html_url": data["html_url"], "merged_at": pr.merged_at}
        return data

    def _comment_json(self, repo: str, number: int, comment: FakeComment) -> dict[str, Any]:
        return {
            "id": comment.id, "node_id": f"IC_{comment.id}",
            "url": f"{self.url}/repos/{repo}/issues/comments/{comment.id}",
            "html_url": f"https://github.com/{repo}/issues/{number}#issuecomment-{comment.id}",
            "body": comment.body, "user": self._user_json(comment.user),
            "created_at": comment.created_at, "updated_at": comment.created_at,
            "issue_url": f"{self.url}/repos/{repo}/issues/{number}",
            "author_association": "OWNER",
        }
