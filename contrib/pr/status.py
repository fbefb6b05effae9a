"""What GitHub says now about each patchset's PR: state, CI checks, review decision.

``contrib status`` shows this next to what patchset.toml records.  It is
read through the forge only when a token is at hand and the run may use the
network; otherwise the JSON says why not and status shows only the records.
"""

from __future__ import annotations

from typing import Any

from contrib.credentials import find_token
from contrib.errors import ContribError, GitHubError
from contrib.forge.api import ChecksSummary, Forge, ForgeFactory, ForgeUnavailable
from contrib.forge.connect import connect
from contrib.workspace.model import Patchset, Workspace


def open_forge(ws: Workspace, *, online: bool,
               factory: ForgeFactory | None = None) -> tuple[Forge | None, str | None]:
    """(the forge, None), or (None, why GitHub is not read)."""
    if not online:
        return None, "not read: --no-fetch"
    token = find_token(ws.config.github_api_url)
    if token is None:
        return None, "not read: no GitHub token (set GITHUB_TOKEN or GH_TOKEN)"
    return connect(ws.config, token, factory=factory), None


def live_pr(forge: Forge, repo: str, number: int) -> dict[str, Any]:
    """The PR's state now, with its head's CI summary and its review decision (open PRs)."""
    pr = forge.get_pr(repo, number)
    facts: dict[str, Any] = {"state": "merged" if pr.merged else pr.state, "draft": pr.draft,
                             "checks": None, "review": None}
    if pr.state == "open":
        if pr.head_sha:
            facts["checks"] = forge.checks(repo, pr.head_sha).to_json()
        facts["review"] = str(forge.review_state(repo, number))
    return facts


def add_live_prs(ws: Workspace, patchsets: list[Patchset], rows: list[dict[str, Any]], *,
                 online: bool, factory: ForgeFactory | None = None) -> tuple[dict[str, Any], int]:
    """Set each row's ``pr_live``; returns (the document's ``github`` entry, exit code).

    A failure is kept in its row and makes the exit code 1; once GitHub is
    unreachable the remaining PRs are not tried (each would wait its timeout).
    """
    forge, why = open_forge(ws, online=online, factory=factory)
    for row in rows:
        row["pr_live"] = None
    code = 0
    for ps, row in zip(patchsets, rows, strict=True):
        number = (row.get("pr") or {}).get("number")
        if forge is None or not isinstance(number, int):
            continue
        repo = (ps.pr.repo if ps.pr else None) or _upstream_repo(ws, ps)
        try:
            row["pr_live"] = live_pr(forge, repo, number)
        except GitHubError as exc:
            row["pr_live"], code = {"error": str(exc)}, 1
            if isinstance(exc, ForgeUnavailable):
                forge, why = None, f"not read: {exc}"
    return {"api_url": ws.config.github_api_url, "read": why is None, "why": why}, code


def _upstream_repo(ws: Workspace, ps: Patchset) -> str:
    try:
        return ws.config.upstream(ps.upstream).github
    except ContribError:
        return ""


def pr_cells(row: dict[str, Any]) -> tuple[str, str, str]:
    """The PR, CI and review cells of a status table row."""
    pr, live = row.get("pr") or {}, row.get("pr_live") or {}
    if not pr.get("number"):
        return "-", "-", "-"
    if "error" in live:
        return f"#{pr['number']} {pr.get('state') or ''} (GitHub: ?)".strip(), "?", "?"
    state = live.get("state") or pr.get("state") or ""
    draft = " draft" if live.get("draft") else ""
    checks = live.get("checks")
    ci = "-" if not live else ChecksSummary.from_json(checks).text() if checks else "no checks"
    review = (live.get("review") or "-").replace("_", " ")
    return f"#{pr['number']} {state}{draft}".strip(), ci, review
