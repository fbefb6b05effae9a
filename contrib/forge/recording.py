"""The recording forge: every ``--dry-run``.

Reads go to a real forge when there is a token (and find nothing when there
is none); writes never leave the process: each is recorded as (method, REST
path, payload summary) and answered with a plausible object, which later
reads of the same run see (a dry run that "creates" an issue then finds it).
The recorded calls are what a dry run prints.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from contrib.forge.api import (
    DEFAULT_API_URL,
    ChecksSummary,
    Comment,
    Forge,
    FoundPr,
    Issue,
    PrFile,
    PullRequest,
    RecordedCall,
    ReviewState,
    User,
)

NO_TOKEN = "skipped: no token"


def _words(text: str, limit: int = 60) -> str:
    """A payload's text in a few words: its first line, cut short."""
    first = (text.strip().splitlines() or [""])[0]
    return repr(first if len(first) <= limit else first[: limit - 3] + "...")


class RecordingForge:
    """:class:`~contrib.forge.api.Forge` that reads through ``reader`` and records writes.

    ``reader`` is None without a token: reads then record themselves as
    skipped and find nothing.  ``calls`` lists every call in order.
    """

    def __init__(self, reader: Forge | None, api_url: str = DEFAULT_API_URL) -> None:
        self.reader = reader
        self.api_url = reader.api_url if reader is not None else api_url
        self.calls: list[RecordedCall] = []
        self.on_call: Callable[[RecordedCall], None] | None = None  # e.g. to print each call
        self._prs: dict[tuple[str, int], PullRequest] = {}
        self._issues: dict[tuple[str, int], Issue] = {}
        self._comments: dict[tuple[str, int], list[Comment]] = {}
        self._next = 0

    @property
    def writes(self) -> list[RecordedCall]:
        """The calls that would have changed something."""
        return [c for c in self.calls if c.write]

    def _add(self, call: RecordedCall) -> None:
        self.calls.append(call)
        if self.on_call is not None:
            self.on_call(call)

    def _read(self, path: str, summary: str = "") -> Forge | None:
        self._add(RecordedCall("GET", path, summary, False, "" if self.reader else NO_TOKEN))
        return self.reader

    def _write(self, method: str, path: str, summary: str) -> None:
        self._add(RecordedCall(method, path, summary, True))

    def _new_number(self) -> int:
        # 0, -1, ...: never a real number, so nothing can mistake it for one.
        number, self._next = self._next, self._next - 1
        return number

    # -- pull requests ------------------------------------------------------------------

    def find_pr(self, repo: str, head: str, base: str) -> PullRequest | None:
        reader = self._read(f"/repos/{repo}/pulls", f"state=all head={head} base={base}")
        ours = [p for (r, _), p in self._prs.items() if r == repo and (p.head, p.base) == (head, base)]
        if ours:
            return ours[-1]
        return reader.find_pr(repo, head, base) if reader else None

    def create_draft_pr(self, repo: str, *, head: str, base: str, title: str, body: str,
                        maintainer_can_modify: bool = True) -> PullRequest:
        self._write("POST", f"/repos/{repo}/pulls", f"head={head} draft=true")
        number = self._new_number()
        pr = PullRequest(number=number, url=f"https://github.com/{repo}/pulls (new)",
                         state="open", merged=False, merged_at=None, merge_commit_sha=None,
                         title=title, body=body, head=head, base=base, draft=True)
        self._prs[(repo, number)] = pr
        return pr

    def update_pr(self, repo: str, number: int, *, title: str, body: str) -> PullRequest:
        self._write("PATCH", f"/repos/{repo}/pulls/{number}", "title, body")
        pr = replace(self.get_pr(repo, number, quiet=True), title=title, body=body)
        self._prs[(repo, number)] = pr
        return pr

    def reopen_pr(self, repo: str, number: int) -> PullRequest:
        self._write("PATCH", f"/repos/{repo}/pulls/{number}", "state=open")
        pr = replace(self.get_pr(repo, number, quiet=True), state="open")
        self._prs[(repo, number)] = pr
        return pr

    def get_pr(self, repo: str, number: int, *, quiet: bool = False) -> PullRequest:
        """PR ``number``: as this run left it, else as the forge has it."""
        if (repo, number) in self._prs:
            return self._prs[(repo, number)]
        reader = self.reader if quiet else self._read(f"/repos/{repo}/pulls/{number}")
        if reader is not None:
            return reader.get_pr(repo, number)
        return PullRequest(number=number, url=f"https://github.com/{repo}/pull/{number}",
                           state="open", merged=False, merged_at=None, merge_commit_sha=None,
                           title="", body="", head="", base="", draft=True)

    def review_state(self, repo: str, number: int) -> ReviewState:
        reader = self._read(f"/repos/{repo}/pulls/{number}/reviews")
        if reader is None or number <= 0:
            return ReviewState.REVIEW_REQUIRED
        return reader.review_state(repo, number)

    def checks(self, repo: str, sha: str) -> ChecksSummary:
        reader = self._read(f"/repos/{repo}/commits/{sha}/check-runs")
        return reader.checks(repo, sha) if reader else ChecksSummary.count([])

    def search_prs(self, repo: str, words: str) -> list[FoundPr]:
        reader = self._read("/search/issues", f"q=repo:{repo} is:pr is:open {words}")
        return reader.search_prs(repo, words) if reader else []

    def pr_files(self, repo: str, number: int) -> list[PrFile]:
        reader = self._read(f"/repos/{repo}/pulls/{number}/files")
        return reader.pr_files(repo, number) if reader and number > 0 else []

    # -- issues and comments -------------------------------------------------------------

    def list_issues(self, repo: str) -> list[Issue]:
        reader = self._read(f"/repos/{repo}/issues", "state=all")
        found = {i.number: i for i in (reader.list_issues(repo) if reader else [])}
        found.update({n: i for (r, n), i in self._issues.items() if r == repo})
        return list(found.values())

    def create_issue(self, repo: str, *, title: str, body: str) -> Issue:
        self._write("POST", f"/repos/{repo}/issues", f"title={_words(title)}")
        number = self._new_number()
        issue = Issue(number, f"https://github.com/{repo}/issues (new)", "open", title, body)
        self._issues[(repo, number)] = issue
        return issue

    def get_issue(self, repo: str, number: int, *, quiet: bool = False) -> Issue:
        """Issue ``number``: as this run left it, else as the forge has it."""
        if (repo, number) in self._issues:
            return self._issues[(repo, number)]
        reader = self.reader if quiet else self._read(f"/repos/{repo}/issues/{number}")
        if reader is not None:
            return reader.get_issue(repo, number)
        return Issue(number, f"https://github.com/{repo}/issues/{number}", "open", "", "")

    def edit_issue(self, repo: str, number: int, *, title: str | None = None,
                   body: str | None = None, state: str | None = None) -> Issue:
        changes = {k: v for k, v in (("title", title), ("body", body), ("state", state))
                   if v is not None}
        summary = ", ".join(f"state={v}" if k == "state" else k for k, v in changes.items())
        self._write("PATCH", f"/repos/{repo}/issues/{number}", summary)
        issue = replace(self.get_issue(repo, number, quiet=True), **changes)  # type: ignore[arg-type]
        self._issues[(repo, number)] = issue
        return issue

    def list_comments(self, repo: str, number: int) -> list[Comment]:
        reader = self._read(f"/repos/{repo}/issues/{number}/comments")
        found = reader.list_comments(repo, number) if reader and number > 0 else []
        return found + self._comments.get((repo, number), [])

    def create_comment(self, repo: str, number: int, body: str) -> Comment:
        self._write("POST", f"/repos/{repo}/issues/{number}/comments", f"body={_words(body)}")
        comment = Comment(self._new_number(), f"https://github.com/{repo}/issues/{number}",
                          body, "(you)")
        self._comments.setdefault((repo, number), []).append(comment)
        return comment

    # -- the token -----------------------------------------------------------------------

    def current_user(self) -> User:
        reader = self._read("/user")
        return reader.current_user() if reader else User("(no token)", None)

    def can_push(self, repo: str) -> bool:
        reader = self._read(f"/repos/{repo}")
        return reader.can_push(repo) if reader else False
