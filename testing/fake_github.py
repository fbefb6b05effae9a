"""A stateful fake of the GitHub REST API, served over real HTTP on 127.0.0.1.

Tests drive the real PyGithub client against it (ghstack's approach): it keeps
repositories, pull requests, issues, comments, checks and reviews across
calls, answers with GitHub's JSON shapes and error bodies, records every
request, and injects the failures that matter (tests/fake_github_faults.py):
rate limits with ``Retry-After``, a 5xx *after* a write landed, slow and
never-answering requests, HTML pages, invalid JSON, wrong shapes, wrongly
typed fields, redirect loops.

Endpoints here: ``GET /repos/{o}/{r}``, ``GET``/``POST /repos/{o}/{r}/pulls``
(``state``, ``head``, ``base``, pagination), ``GET``/``PATCH
/repos/{o}/{r}/pulls/{n}``; issues, comments, check runs, commit statuses,
reviews and ``GET /user`` are in testing/fake_github_issues.py; search and a
PR's files in testing/fake_github_search.py.  The git side
(smart HTTP for pushes) is :class:`testing.fake_githost.FakeGitHost`.

The ``fake_github`` fixture is :func:`fake_github_fixture`: import that name
into a test module, or list ``testing.fake_github`` in ``pytest_plugins``.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from testing.fake_githost import FakeGitHost
from testing.fake_github_base import DOCS, PR, RecordedRequest, Repo
from testing.fake_github_base import HTTPError as _HTTPError
from testing.fake_github_base import not_found as _not_found
from testing.fake_github_base import now as _now
from testing.fake_github_base import validation_failed as _validation_failed
from testing.fake_github_faults import (
    Fault,
    FaultKnobs,
    RawBody,
)
from testing.fake_github_issues import IssueEndpoints
from testing.fake_github_search import SearchEndpoints
from testing.httpserve import FakeServer

PULLS_DOC = "https://docs.github.com/rest/pulls/pulls"


class FakeGitHub(FaultKnobs, IssueEndpoints, SearchEndpoints):
    """The server's state, fault knobs and request log; start()/stop() run it.

    ``scopes`` is the ``X-OAuth-Scopes`` header of ``GET /user`` (None: absent,
    as for fine-grained tokens).
    """

    def __init__(self, token: str, *, login: str = "contrib-bot",
                 scopes: str | None = "repo, workflow") -> None:
        self.token = token
        self.login = login
        self.scopes = scopes
        self._init_issue_state()
        self._stopping = threading.Event()
        self.requests: list[RecordedRequest] = []
        self.faults: list[Fault] = []
        self._repos: dict[str, Repo] = {}
        self._prs: dict[str, list[PR]] = {}
        self._ids = iter(range(1000, 10**9))
        self._lock = threading.RLock()
        self._server: FakeServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------

    def start(self) -> None:
        """Serve on 127.0.0.1, a random free port, in a daemon thread."""
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = FakeServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket (a hanging handler is let go)."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def url(self) -> str:
        """The base URL to hand PyGithub (``base_url``) or contrib.toml (``api_url``)."""
        assert self._server is not None, "server not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # -- state helpers for tests --------------------------------------------------

    def add_repo(
        self,
        full_name: str,
        *,
        fork_of: str | None = None,
        git_dir: str | None = None,
        default_branch: str = "main",
        private: bool = False,
        push: bool = False,
    ) -> None:
        """Make ``owner/name`` exist; ``git_dir`` is a bare repo whose refs back PRs;
        ``push``: whether the token may push there."""
        with self._lock:
            self._repos[full_name] = Repo(
                full_name, next(self._ids), default_branch, fork_of, git_dir, private, push
            )
            self._prs.setdefault(full_name, [])

    def pulls(self, repo: str) -> list[dict[str, Any]]:
        """Every PR of ``repo`` as the single-PR endpoint would render it."""
        with self._lock:
            return [self._pr_json(pr, full=True) for pr in self._prs.get(repo, [])]

    def merge_pr(self, repo: str, number: int, merge_commit_sha: str | None = None) -> None:
        """Simulate a maintainer merging PR ``number``."""
        with self._lock:
            pr = self._find(repo, number)
            now = _now()
            self._close(pr)
            pr.merged, pr.merged_at = True, now
            pr.merged_by = "maintainer"
            pr.merge_commit_sha = merge_commit_sha or hashlib.sha1(
                f"merge {repo} {number}".encode()
            ).hexdigest()
            pr.updated_at = now

    def close_pr(self, repo: str, number: int) -> None:
        """Simulate a human closing PR ``number`` without merging it."""
        with self._lock:
            pr = self._find(repo, number)
            self._close(pr)

    def _close(self, pr: PR) -> None:
        # A closed PR keeps the head sha it had; later pushes no longer move it.
        pr.head_sha = self._ref_sha(self._repos[pr.head_repo], pr.head_ref) or pr.head_sha
        pr.state, pr.closed_at, pr.updated_at = "closed", _now(), _now()

    def writes(self) -> list[RecordedRequest]:
        """Every request that could change something (any method but GET/HEAD)."""
        with self._lock:
            return [r for r in self.requests if r.method not in ("GET", "HEAD")]

    def calls(self, method: str | None = None, path: str | None = None) -> list[RecordedRequest]:
        """Recorded requests, filtered by method and a full-match path regex."""
        with self._lock:
            return [
                r
                for r in self.requests
                if (method is None or r.method == method)
                and (path is None or re.fullmatch(path, r.path))
            ]

    # -- request handling ---------------------------------------------------------

    def handle(self, req: RecordedRequest) -> tuple[int, dict[str, str], Any]:
        """Route one request; returns (status, extra headers, JSON body or RawBody)."""
        with self._lock:
            self.requests.append(req)
            fault = next((f for f in self.faults if f.matches(req.method, req.path)), None)
            if fault is not None:
                fault.count -= 1
        try:
            self._check_auth(req)
            early = self._fault_before(fault) if fault is not None else None
            if early is not None:
                return early
            with self._lock:
                status, headers, body = self._route(req)
            if fault is not None and fault.kind == "after":
                return fault.status, {}, {"message": "Server Error"}
            if fault is not None and fault.kind == "mutate" and fault.mutate is not None:
                return status, headers, fault.mutate(body)
            return status, headers, body
        except _HTTPError as e:
            return e.status, e.headers, e.body

    def _check_auth(self, req: RecordedRequest) -> None:
        auth = req.headers.get("authorization", "")
        scheme, _, value = auth.partition(" ")
        if scheme.lower() not in ("token", "bearer") or value != self.token:
            raise _HTTPError(401, {"message": "Bad credentials", "documentation_url": DOCS, "status": "401"})

    def _route(self, req: RecordedRequest) -> tuple[int, dict[str, str], Any]:
        more = self._route_search(req) or self._route_more(req)
        if more is not None:
            return more
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)(/pulls(?:/(\d+))?)?", req.path)
        if m is None:
            raise _not_found()
        repo = self._repo(m.group(1))
        if m.group(2) is None:
            if req.method != "GET":
                raise _not_found()
            return 200, {}, self._repo_json(repo)
        if m.group(3) is None:
            if req.method == "GET":
                return self._list_pulls(repo, req)
            if req.method == "POST":
                return 201, {}, self._create_pull(repo, req.json() or {})
            raise _not_found()
        pr = self._find(repo.full_name, int(m.group(3)))
        if req.method == "GET":
            return 200, {}, self._pr_json(pr, full=True)
        if req.method == "PATCH":
            return 200, {}, self._edit_pull(pr, req.json() or {})
        raise _not_found()

    def _repo(self, full_name: str) -> Repo:
        repo = self._repos.get(full_name)
        if repo is None:
            raise _not_found("https://docs.github.com/rest/repos/repos#get-a-repository")
        return repo

    def _find(self, repo: str, number: int) -> PR:
        for pr in self._prs.get(repo, []):
            if pr.number == number:
                return pr
        raise _not_found(f"{PULLS_DOC}#get-a-pull-request")

    def _list_pulls(self, repo: Repo, req: RecordedRequest) -> tuple[int, dict[str, str], Any]:
        state = req.query.get("state", "open")
        head = req.query.get("head")
        base = req.query.get("base")
        found = []
        for pr in sorted(self._prs[repo.full_name], key=lambda p: -p.number):
            if state != "all" and pr.state != state:
                continue
            label = f"{self._repos[pr.head_repo].owner}:{pr.head_ref}"
            if head and head != (label if ":" in head else pr.head_ref):
                continue
            if base and base != pr.base_ref:
                continue
            found.append(self._pr_json(pr, full=False))
        return self._paginate(req, found)

    def _paginate(self, req: RecordedRequest, found: list[Any]) -> tuple[int, dict[str, str], Any]:
        """One page of ``found`` (``page``, ``per_page`` up to 100), with GitHub's Link header."""
        per_page = min(100, int(req.query.get("per_page", "30")))
        page = int(req.query.get("page", "1"))
        chunk = found[(page - 1) * per_page : page * per_page]
        headers = {}
        last = max(1, -(-len(found) // per_page))
        if page < last:
            query = "&".join(f"{k}={v}" for k, v in req.query.items() if k != "page")
            link = f"{self.url}{req.path}?{query}&page="
            headers["Link"] = f'<{link}{page + 1}>; rel="next", <{link}{last}>; rel="last"'
        return 200, headers, chunk

    def _create_pull(self, repo: Repo, data: dict[str, Any]) -> dict[str, Any]:
        doc = f"{PULLS_DOC}#create-a-pull-request"
        missing = [k for k in ("head", "base") if not data.get(k)]
        if missing or not data.get("title"):
            raise _validation_failed(
                [{"resource": "PullRequest", "code": "missing_field", "field": k} for k in missing or ["title"]],
                doc,
            )
        owner, _, ref = str(data["head"]).rpartition(":")
        head_repo = self._head_repo(repo, owner or repo.owner)
        head_sha = self._ref_sha(head_repo, ref) if head_repo else None
        if head_repo is None or head_sha is None:
            raise _validation_failed([{"resource": "PullRequest", "field": "head", "code": "invalid"}], doc)
        if repo.git_dir and self._ref_sha(repo, data["base"]) is None:
            raise _validation_failed([{"resource": "PullRequest", "field": "base", "code": "invalid"}], doc)
        label = f"{head_repo.owner}:{ref}"
        for pr in self._prs[repo.full_name]:
            if pr.state == "open" and pr.head_repo == head_repo.full_name and pr.head_ref == ref and pr.base_ref == data["base"]:
                raise _validation_failed(
                    [{"resource": "PullRequest", "code": "custom",
                      "message": f"A pull request already exists for {label}."}],
                    doc,
                )
        now = _now()
        pr = PR(
            repo=repo.full_name,
            number=self._next_number(repo.full_name),
            id=next(self._ids),
            title=str(data["title"]),
            body=data.get("body"),
            head_repo=head_repo.full_name,
            head_ref=ref,
            head_sha=head_sha,
            base_ref=str(data["base"]),
            draft=bool(data.get("draft", False)),
            maintainer_can_modify=bool(data.get("maintainer_can_modify", True)),
            user=self.login,
            created_at=now,
            updated_at=now,
        )
        self._prs[repo.full_name].append(pr)
        return self._pr_json(pr, full=True)

    def _next_number(self, repo: str) -> int:
        """Issues and pull requests share one sequence of numbers, as on GitHub."""
        numbers = [p.number for p in self._prs.get(repo, [])]
        numbers += [i.number for i in self._issues.get(repo, [])]
        return 1 + max(numbers, default=0)

    def _head_repo(self, base: Repo, owner: str) -> Repo | None:
        if owner == base.owner:
            return base
        for r in self._repos.values():
            if r.owner == owner and r.fork_of == base.full_name:
                return r
        return None

    @staticmethod
    def _ref_sha(repo: Repo, ref: str) -> str | None:
        if repo.git_dir is None:
            return hashlib.sha1(f"{repo.full_name}:{ref}".encode()).hexdigest()
        out = subprocess.run(
            ["git", "--git-dir", repo.git_dir, "rev-parse", "--verify", "-q", f"refs/heads/{ref}^{{commit}}"],
            capture_output=True, text=True, check=False,
        )
        return out.stdout.strip() or None

    def _edit_pull(self, pr: PR, data: dict[str, Any]) -> dict[str, Any]:
        doc = f"{PULLS_DOC}#update-a-pull-request"
        if "state" in data and data["state"] not in ("open", "closed"):
            raise _validation_failed([{"resource": "PullRequest", "field": "state", "code": "invalid"}], doc)
        if data.get("state") == "open" and pr.merged:
            raise _validation_failed(
                [{"resource": "PullRequest", "code": "custom",
                  "message": "state cannot be changed. The pull request has already been merged."}],
                doc,
            )
        if data.get("state") == "open" and pr.state == "closed":
            now_sha = self._ref_sha(self._repos[pr.head_repo], pr.head_ref)
            if now_sha != pr.head_sha:  # GitHub's rule: a branch rewritten while closed
                raise _validation_failed(
                    [{"resource": "PullRequest", "code": "custom", "field": "state",
                      "message": f"state cannot be changed. The {pr.head_ref} branch was "
                                 "force-pushed or recreated."}],
                    doc,
                )
            pr.state, pr.closed_at = "open", None
        elif data.get("state") == "closed" and pr.state == "open":
            self._close(pr)
        if "title" in data:
            pr.title = str(data["title"])
        if "body" in data:
            pr.body = data["body"]
        if "maintainer_can_modify" in data:
            pr.maintainer_can_modify = bool(data["maintainer_can_modify"])
        pr.updated_at = _now()
        return self._pr_json(pr, full=True)

    # -- JSON shapes (a subset of GitHub's, enough for PyGithub) -------------------

    def _user_json(self, login: str) -> dict[str, Any]:
        return {"login": login, "id": int(hashlib.sha1(login.encode()).hexdigest()[:6], 16),
                "type": "User", "url": f"{self.url}/users/{login}",
                "html_url": f"https://github.com/{login}"}

    def _repo_json(self, repo: Repo) -> dict[str, Any]:
        return {
            "id": repo.id, "node_id": f"R_{repo.id}", "name": repo.full_name.split("/")[1],
            "full_name": repo.full_name, "private": repo.private, "fork": repo.fork_of is not None,
            "owner": self._user_json(repo.owner), "html_url": f"https://github.com/{repo.full_name}",
            "url": f"{self.url}/repos/{repo.full_name}", "default_branch": repo.default_branch,
            "permissions": {"admin": False, "push": repo.push, "pull": True},
        }

    def _ref_json(self, repo_name: str, ref: str, sha: str) -> dict[str, Any]:
        repo = self._repos[repo_name]
        return {"label": f"{repo.owner}:{ref}", "ref": ref, "sha": sha,
                "user": self._user_json(repo.owner), "repo": self._repo_json(repo)}

    def _pr_json(self, pr: PR, *, full: bool) -> dict[str, Any]:
        api = f"{self.url}/repos/{pr.repo}/pulls/{pr.number}"
        head_sha = pr.head_sha
        if pr.state == "open":  # GitHub follows pushes to the head branch of an open PR
            head_sha = self._ref_sha(self._repos[pr.head_repo], pr.head_ref) or pr.head_sha
            pr.head_sha = head_sha
        base_sha = self._ref_sha(self._repos[pr.repo], pr.base_ref) or "0" * 40
        data: dict[str, Any] = {
            "url": api, "id": pr.id, "node_id": f"PR_{pr.id}",
            "html_url": f"https://github.com/{pr.repo}/pull/{pr.number}",
            "diff_url": f"https://github.com/{pr.repo}/pull/{pr.number}.diff",
            "issue_url": f"{self.url}/repos/{pr.repo}/issues/{pr.number}",
            "number": pr.number, "state": pr.state, "locked": False, "title": pr.title,
            "user": self._user_json(pr.user), "body": pr.body,
            "created_at": pr.created_at, "updated_at": pr.updated_at, "closed_at": pr.closed_at,
            "merged_at": pr.merged_at, "merge_commit_sha": pr.merge_commit_sha,
            "labels": [], "draft": pr.draft, "author_association": "CONTRIBUTOR",
            "head": self._ref_json(pr.head_repo, pr.head_ref, head_sha),
            "base": self._ref_json(pr.repo, pr.base_ref, base_sha),
        }
        if full:  # only the single-PR endpoint returns these, as on GitHub
            data.update({
                "merged": pr.merged, "mergeable": None, "mergeable_state": "unknown",
                "merged_by": self._user_json(pr.merged_by) if pr.merged_by else None,
                "maintainer_can_modify": pr.maintainer_can_modify,
                "comments": 0, "commits": 1, "additions": 0, "deletions": 0, "changed_files": 0,
            })
        return data


class _Handler(BaseHTTPRequestHandler):
    fake: FakeGitHub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
        pass

    def _serve(self) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        req = RecordedRequest(
            method=self.command,
            path=parts.path,
            query={k: v[-1] for k, v in parse_qs(parts.query).items()},
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )
        status, headers, payload = self.fake.handle(req)
        content_type = "application/json; charset=utf-8"
        if isinstance(payload, RawBody):
            data, content_type = payload.data, payload.content_type
        else:
            data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout): the work is done, the answer is lost

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve


FAKE_TOKEN_PREFIX = "ghp_contribFAKE"


def make_token() -> str:
    """A fresh, unmistakable token for one test (easy to grep for)."""
    return FAKE_TOKEN_PREFIX + secrets.token_hex(12)


@pytest.fixture(name="fake_github")
def fake_github_fixture() -> Iterator[FakeGitHub]:
    """A running :class:`FakeGitHub` with a fresh token; stopped after the test."""
    fake = FakeGitHub(make_token())
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()


__all__ = ["FakeGitHost", "FakeGitHub", "Fault", "RawBody", "RecordedRequest", "fake_github_fixture",
           "make_token"]
