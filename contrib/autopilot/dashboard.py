"""The dashboard: one issue in the workspace's own repository that tells a maintainer
everything that needs them (Renovate's Dependency Dashboard is the model).

The issue is ``[autopilot] repo``'s, titled ``[autopilot] dashboard_title``;
its body starts with the line ``<!-- contrib:dashboard -->``.  It is found by
listing the repository's issues in every state and matching that line (the
search API lags and does not index HTML comments): none -> created, closed ->
reopened, never a second one -- a create answered 5xx is followed by a fresh
listing before any retry, since the server may have made it.  A body whose
content (everything above the footer) is unchanged is not written at all.

Body: a row per patchset (base -> upstream tip, commits behind, the last sync
result with the breaking or landing commit linked, the validation verdict per
arch and where each run ran, the PR with its state and CI checks), then
the "Audit" of every upstream for each ``[autopilot] audit_arch``
(:mod:`contrib.autopilot.audits`), the "Drafted" patchsets of ``[autopilot] enable``
(:mod:`contrib.autopilot.drafts`), "Needs you", then a footer with contrib's
version, the time and the Actions run.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from contrib import __version__
from contrib.autopilot import drafts
from contrib.autopilot.audits import audit_all, section
from contrib.autopilot.state import ELSEWHERE, WAITING, Need, Outcome, Run, validation_view
from contrib.carry.report import CONFLICT
from contrib.clock import now_iso
from contrib.errors import ContribError
from contrib.forge.api import Forge, ForgeUnavailable, Issue
from contrib.git.cache import Mirror
from contrib.record import Run as RecordedRun
from contrib.record import version_standing
from contrib.secrets import scrub
from contrib.validate import bench
from contrib.workspace.model import Patchset, Workspace
from contrib.workspace.schema import Landed

MARKER = "<!-- contrib:dashboard -->"
FOOTER = "<!-- contrib:dashboard-footer -->"
MAX_BODY = 65_000  # GitHub's limit is 65,536 characters


def update(ws: Workspace, outcomes: list[Outcome], run: Run) -> None:
    """Render the dashboard and make the issue say it; ``run.dashboard`` tells what happened."""
    settings = ws.config.autopilot
    if not settings.repo:
        run.dashboard = {"result": "skipped", "reason": "no [autopilot] repo in contrib.toml"}
        return
    run.audits = audit_all(ws, run)  # before render: a failed audit is one of its Needs
    try:
        forge = run.forges.workspace(ws)
        body = render(ws, outcomes, run, forge)
        if forge is None:
            raise ContribError("no token for the dashboard: set CONTRIB_WORKSPACE_TOKEN or "
                               "GITHUB_TOKEN")
        issue, result = publish(forge, settings.repo, settings.dashboard_title, body)
        run.dashboard = {"result": result, "number": issue.number, "url": issue.url}
    except ContribError as exc:
        run.dashboard = {"result": "error", "error": scrub(str(exc))}
        run.problems.append(Need("github", f"dashboard: {scrub(str(exc))}"))


# -- finding and writing the issue --------------------------------------------------

def find(forge: Forge, repo: str) -> Issue | None:
    """The dashboard issue of ``repo`` in any state (the oldest, should there be several)."""
    mine = [i for i in forge.list_issues(repo) if i.body.lstrip("\ufeff \n").startswith(MARKER)]
    return min(mine, key=lambda i: i.number) if mine else None


def publish(forge: Forge, repo: str, title: str, body: str) -> tuple[Issue, str]:
    """Make the one dashboard issue say ``body``: (issue, created|reopened|updated|unchanged)."""
    issue = find(forge, repo)
    if issue is None:
        return _create(forge, repo, title, body), "created"
    changes: dict[str, str] = {}
    if content(issue.body) != content(body):
        changes["body"] = body
    if issue.title != title:
        changes["title"] = title
    if issue.state != "open":
        changes["state"] = "open"
    if not changes:
        return issue, "unchanged"
    edited = forge.edit_issue(repo, issue.number, **changes)
    return edited, "reopened" if "state" in changes else "updated"


def _create(forge: Forge, repo: str, title: str, body: str) -> Issue:
    try:
        return forge.create_issue(repo, title=title, body=body)
    except ForgeUnavailable:
        # The server may have made it before the answer was lost: look before retrying.
        made = find(forge, repo)
        return made if made is not None else forge.create_issue(repo, title=title, body=body)


def content(body: str) -> str:
    """The part of a body that counts as a change: everything above the footer."""
    return body.split(FOOTER, 1)[0].rstrip()


# -- rendering ----------------------------------------------------------------------

def render(ws: Workspace, outcomes: list[Outcome], run: Run, forge: Forge | None) -> str:
    """The whole issue body."""
    by_target = {o.patchset: o for o in outcomes}
    every = ws.patchsets()
    rows = [_row(ws, ps, by_target.get(ps.target), forge) for ps in every]
    others = [n for ps in every if ps.target not in by_target for n in recorded_needs(ws, ps)]
    needs = _needs_section(ws, run.needs(outcomes) + others)
    table = ("| patchset | base → upstream tip | behind | last sync | validation | PR |\n"
             "| --- | --- | --- | --- | --- | --- |\n" + "".join(rows)) if rows else \
        "No patchsets yet: create one with `contrib new`.\n"
    title = ws.config.autopilot.dashboard_title
    audit = section(run.audits)
    drafted = drafts.section(ws, run)
    head = f"{MARKER}\n# {title}\n\n{table}\n" + (f"{audit}\n" if audit else "") + (
        f"{drafted}\n" if drafted else "")
    tail = f"\n{FOOTER}\n{_footer()}\n"
    room = MAX_BODY - len(head) - len(tail)
    if len(needs) > room:  # GitHub refuses bodies over 65536 characters
        cut = needs[:room - 200].rsplit("\n", 1)[0]
        needs = cut + "\n\n(cut short: the rest is in the run's `--json` output)\n"
    return scrub(head + needs + tail)


def recorded_needs(ws: Workspace, ps: Patchset) -> list[Need]:
    """What a patchset this run did not select still needs, as the workspace records it
    (a run for some targets must not drop the others' entries from the dashboard)."""
    needs = []
    last = ps.sync
    if last is not None and last.result == CONFLICT and last.details.conflict:
        needs.append(Need.conflict(ws, ps.target, dict(last.details.conflict)))
    view = validation_view(ps.target, version_standing(ps.current))
    if view.verdict == "failed":
        needs.append(Need.failed_validation(view))
    if ps.pr is not None and ps.pr.state == "closed":
        needs.append(Need("pr-closed", f"{ps.target}: PR #{ps.pr.number} ({ps.pr.url}) was "
                          "closed by a human",
                          {"patchset": ps.target}))
    return needs


def _row(ws: Workspace, ps: Patchset, outcome: Outcome | None, forge: Forge | None) -> str:
    upstream = ws.config.upstream(ps.upstream)
    base = ps.current.base
    tip, behind = _tip(ws, ps)
    cells = [f"`{ps.target}`", f"{_commit(upstream.github, base)} → {_commit(upstream.github, tip)}"
             if tip else _commit(upstream.github, base), "?" if behind is None else str(behind),
             _sync_cell(ps, upstream.github), _validation_cell(ps),
             _pr_cell(ps, outcome, forge, upstream.github)]
    return "| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |\n"


def _tip(ws: Workspace, ps: Patchset) -> tuple[str | None, int | None]:
    try:
        mirror = Mirror(ws.config.upstream(ps.upstream))
        tip = mirror.tip(ps.branch)
        git = mirror.git
        behind = git.count(f"{ps.current.base}..{tip}") if git.try_rev_parse(
            ps.current.base) else None
        return tip, behind
    except ContribError:
        return None, None


def _commit(github: str, sha: str | None, subject: str = "") -> str:
    if not sha:
        return "?"
    text = f"`{sha[:7]}`" + (f" {subject}" if subject else "")
    return f"[{text}](https://github.com/{github}/commit/{sha})" if github else text


def _sync_cell(ps: Patchset, github: str) -> str:
    last = ps.sync
    if last is None:
        return "never synced"
    commit = (last.details.conflict or {}).get("commit")
    if last.result == CONFLICT and isinstance(commit, dict):
        return f"**conflict** at {_commit(github, commit.get('sha'), commit.get('subject', ''))}"
    landed = [u for u in last.details.upstreamed if u.sha]
    if landed:
        links = ", ".join(_commit(github, u.sha, u.subject or "") + _evidence(github, u)
                          for u in landed)
        return f"{last.result}: landed in {links}"
    return str(last.result)


def _evidence(github: str, landed: Landed) -> str:
    """" (88% of its lines; then changed by X)" for a patch upstream landed in its own form."""
    if landed.share is None:
        return ""
    changed = ", ".join(_commit(github, sha) for sha in landed.changed_by)
    return f" ({landed.share:.0%} of its lines" + (f"; then changed by {changed})"
                                                   if changed else ")")


def _validation_cell(ps: Patchset) -> str:
    try:
        standing = version_standing(ps.current)
    except ContribError as exc:
        return f"unreadable: {exc}"
    if not standing.bound:
        return f"not validated ({standing.cause})"
    parts = []
    for verdict in standing.verdicts:
        where = "; ".join(sorted({r.host.describe() for r in verdict.runs}))
        parts.append(f"**{verdict.line()}** on {where}")
    parts += _bench_lines(standing.record.runs if standing.record is not None else ())
    return "<br>".join(parts)


def _bench_lines(runs: Sequence[RecordedRun]) -> list[str]:
    """The bench stage's figures per run: ratio patched/base and its interval, per metric."""
    lines = []
    for run in runs:
        stage = run.stage("bench")
        figures = (stage.details.get("metrics") or []) if stage is not None else []
        shown = "; ".join(bench.line(f) for f in figures[:3]) + (" ..." if len(figures) > 3 else "")
        if shown:
            lines.append(f"bench {run.arch}: {shown}")
    return lines


def _pr_cell(ps: Patchset, outcome: Outcome | None, forge: Forge | None, github: str) -> str:
    recorded = ps.pr
    pr = (outcome.pr if outcome and outcome.pr else None) or (
        {"number": recorded.number, "url": recorded.url, "state": recorded.state,
         "draft": recorded.draft, "head_sha": recorded.pushed} if recorded else {})
    if not pr.get("number"):
        steps = [a for a in (outcome.actions if outcome else []) if a["step"] == "pr"]
        theirs = [a for a in steps if a["result"] == ELSEWHERE]
        if theirs:  # somebody else's upstream PR proposes this draft already
            return f"[#{theirs[0]['number']}]({theirs[0]['url']}) by @{theirs[0]['user']} " \
                   "(upstream)"
        waiting = [a for a in steps if a["result"] == WAITING]
        return f"none (waiting: {waiting[0]['reason']})" if waiting else "none"
    state = str(pr.get("state") or "?") + (" draft" if pr.get("draft") else "")
    text = f"[#{pr['number']}]({pr.get('url')}) {state}"
    head = pr.get("head_sha") or (recorded.pushed if recorded else None)
    if forge is not None and head and github:
        try:
            text += f", CI: {forge.checks(github, str(head)).text()}"
        except ContribError:
            text += ", CI: unknown"
    if forge is not None and github and pr.get("state") == "open":
        try:  # next to CI, what reviewers said: approved, changes requested, none yet
            text += f", review: {str(forge.review_state(github, int(pr['number']))).replace('_', ' ')}"
        except ContribError:
            text += ", review: unknown"
    return text


def _needs_section(ws: Workspace, needs: list[Need]) -> str:
    if not needs:
        return "## Needs you\n\nNothing: every patchset is carried, validated and current.\n"
    out = ["## Needs you\n"]
    for need in needs:
        out.append(f"- **{need.kind}**: {need.text}")
        if need.kind == "conflict":
            commit = need.details.get("commit") or {}
            github = ws.config.upstream(str(need.details["patchset"]).split("/")[0]).github
            out += [f"  - breaking commit: {_commit(github, commit.get('sha'), commit.get('subject', ''))}",
                    f"  - files: {', '.join(f'`{f}`' for f in need.details.get('files', []))}",
                    "  - then:", "    ```sh", *(f"    {c}" for c in need.details["commands"]),
                    "    ```"]
        for finding in need.details.get("findings", [])[:20]:
            out.append(f"  - {finding['text']}")
    return "\n".join(out) + "\n"


def _footer() -> str:
    """contrib's version, the time and, on Actions, the run that wrote it."""
    server, repo, run_id = (os.environ.get(k, "") for k in (
        "GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    link = f" by [this run]({server}/{repo}/actions/runs/{run_id})" if server and repo and \
        run_id else ""
    return f"<sub>Updated by contrib {__version__} at {now_iso()}{link}.</sub>"

