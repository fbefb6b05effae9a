"""The fake GitHub's search and a pull request's files.

A mixin of :class:`testing.fake_github.FakeGitHub`, kept apart as the issues are:

- ``GET /search/issues?q=...``: issues and pull requests by text, with the
  qualifiers contrib sends (``repo:O/R``, ``is:pr``/``is:issue``,
  ``is:open``/``is:closed``/``state:``, ``author:``); the other words must each
  appear in the title or body as a word of their own (any case), ``a OR b``
  either of two, ``"a phrase"`` as written.  The answer has GitHub's shape
  (``total_count``, ``incomplete_results``, ``items``: issue objects, pull
  requests marked by ``pull_request``), paginated with ``Link``;
- ``GET /repos/{o}/{r}/pulls/{n}/files``: the files a test gave the PR
  (:meth:`SearchEndpoints.add_pr_by`), paginated.
"""

from __future__ import annotations

import re
from typing import Any

from testing.fake_github_base import PR, RecordedRequest, Repo, now, validation_failed

SEARCH_DOC = "https://docs.github.com/rest/search/search#search-issues-and-pull-requests"
Answer = tuple[int, dict[str, str], Any]


class SearchEndpoints:
    """State helpers and routes for search; FakeGitHub provides the helpers used here."""

    login: str
    _ids: Any
    _lock: Any
    _repos: dict[str, Repo]
    _prs: dict[str, list[PR]]
    _issues: dict[str, list[Any]]

    def _repo(self, full_name: str) -> Repo: ...
    def _find(self, repo: str, number: int) -> PR: ...
    def _paginate(self, req: RecordedRequest, items: list[Any]) -> Answer: ...
    def _next_number(self, repo: str) -> int: ...
    def _issue_json(self, issue: Any) -> dict[str, Any]: ...
    def _pr_as_issue(self, pr: PR) -> dict[str, Any]: ...
    def add_repo(self, full_name: str, *, fork_of: str | None = None, **kw: Any) -> None: ...

    # -- state helpers for tests ----------------------------------------------------------

    def add_pr_by(self, repo: str, user: str, *, title: str, body: str = "",
                  files: list[dict[str, Any]] | None = None, draft: bool = False) -> int:
        """A pull request someone else opened from their fork (``USER/NAME``, made when
        missing), changing ``files`` (``{"filename", "status", "patch"}`` each); its number."""
        with self._lock:
            fork = f"{user}/{repo.split('/', 1)[1]}"
            if fork not in self._repos:
                self.add_repo(fork, fork_of=repo)
            stamp = now()
            number = self._next_number(repo)
            pr = PR(repo=repo, number=number, id=next(self._ids), title=title, body=body,
                    head_repo=fork, head_ref=f"pr-{number}", head_sha="0" * 40, base_ref="main",
                    draft=draft, maintainer_can_modify=True, user=user, created_at=stamp,
                    updated_at=stamp, files=[dict(f) for f in files or []])
            self._prs.setdefault(repo, []).append(pr)
            return number

    # -- routing --------------------------------------------------------------------------

    def _route_search(self, req: RecordedRequest) -> Answer | None:
        """Answer search and PR files; None when the path is neither."""
        if req.method != "GET":
            return None
        if req.path == "/search/issues":
            return self._search(req)
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/pulls/(\d+)/files", req.path)
        if m is None:
            return None
        pr = self._find(self._repo(m.group(1)).full_name, int(m.group(2)))
        return self._paginate(req, [{"sha": "0" * 40, "additions": 0, "deletions": 0,
                                     "changes": 0, "status": "modified", **f} for f in pr.files])

    def _search(self, req: RecordedRequest) -> Answer:
        query = req.query.get("q", "").strip()
        if not query:
            raise validation_failed([{"resource": "Search", "field": "q", "code": "missing"}],
                                    SEARCH_DOC)
        rules, groups = _parse(query)
        found = [item for item in self._searchable(rules.get("repo"))
                 if _qualified(item, rules) and all(any(_has(item, w) for w in g) for g in groups)]
        found.sort(key=lambda i: -int(i["id"]))
        status, headers, page = self._paginate(req, found)
        return status, headers, {"total_count": len(found), "incomplete_results": False,
                                 "items": page}

    def _searchable(self, repo: str | None) -> list[dict[str, Any]]:
        names = [repo] if repo else sorted(set(self._prs) | set(self._issues))
        items = []
        for name in names:
            items += [self._issue_json(i) for i in self._issues.get(name, [])]
            items += [self._pr_as_issue(p) for p in self._prs.get(name, [])]
        return items


def _parse(query: str) -> tuple[dict[str, str], list[list[str]]]:
    """(qualifiers, word groups): each group holds words joined by OR."""
    rules: dict[str, str] = {}
    groups: list[list[str]] = []
    joining = False
    for token in re.findall(r'"[^"]*"|\S+', query):
        key, sep, value = token.partition(":")
        if sep and key in ("repo", "is", "state", "author") and value:
            rules[f"is:{value}" if key == "is" else key] = value
            continue
        if token == "OR" and groups:
            joining = True
            continue
        word = token.strip('"')
        if joining:
            groups[-1].append(word)
        else:
            groups.append([word])
        joining = False
    return rules, groups


def _qualified(item: dict[str, Any], rules: dict[str, str]) -> bool:
    is_pr = "pull_request" in item
    state = rules.get("state") or ("open" if "is:open" in rules else
                                   "closed" if "is:closed" in rules else None)
    return (not ("is:pr" in rules and not is_pr) and not ("is:issue" in rules and is_pr)
            and (state is None or item["state"] == state)
            and ("author" not in rules or item["user"]["login"] == rules["author"]))


def _has(item: dict[str, Any], word: str) -> bool:
    text = f"{item.get('title') or ''}\n{item.get('body') or ''}"
    return re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text,
                     re.IGNORECASE) is not None
