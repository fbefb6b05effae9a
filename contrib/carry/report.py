"""What ``contrib sync`` reports: one :class:`Report` per patchset, as a table or JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contrib.carry.landing import Landing
from contrib.ui import UI, counted, shown_path
from contrib.workspace.schema import SyncResult

# The results a sync reports, by name; a result in OK_RESULTS needs nothing of the user.
UNCHANGED, REBASED, UPSTREAMED = SyncResult.UNCHANGED, SyncResult.REBASED, SyncResult.UPSTREAMED
PARTIAL, ERROR, CONFLICT = SyncResult.PARTIAL, SyncResult.ERROR, SyncResult.CONFLICT
OK_RESULTS = {UNCHANGED, REBASED, UPSTREAMED, PARTIAL}
COLUMNS = ("patchset", "result", "from", "to", "commits", "probes", "details")  # sync's table


@dataclass
class Report:
    """The outcome of one patchset, as shown in the table and in --json."""

    patchset: str
    result: SyncResult
    base: str
    target: str | None = None
    version: str | None = None
    commits: int = 0
    probes: int = 0
    patches: list[str] = field(default_factory=list)
    upstreamed: list[dict[str, Any]] = field(default_factory=list)
    conflict: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    changed: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "changed"}


def show(ui: UI, reports: list[Report], committed: str | None) -> None:
    rows = [[r.patchset, r.result, r.base[:10], (r.version or r.target or "")[:10],
             r.commits or "", r.probes or "", _detail(r)] for r in reports]
    ui.table("sync", COLUMNS, rows)
    for r in reports:
        for note in r.notes:
            ui.info(f"{r.patchset}: {note}")
        _show_landed(ui, r)
        if r.conflict and r.conflict.get("commit", {}).get("subject"):
            _show_conflict(ui, r)
        if r.error:
            ui.info(f"{r.patchset}: error: {r.error}")
    if committed:
        ui.info(f"committed {committed[:12]}")
    ui.emit({"results": [r.as_dict() for r in reports], "commit": committed})


def _detail(r: Report) -> str:
    """One short cell; the long story is printed under the table."""
    if r.result == CONFLICT and r.conflict:
        sha = r.conflict["commit"]["sha"][:10]
        return f"{r.conflict['patch']} breaks at {sha} ({r.conflict['reason']})"
    if r.upstreamed:
        shas = sorted({u["commit"]["sha"][:10] for u in r.upstreamed if u["commit"]})
        where = f" in {', '.join(shas)}" if shas else ""
        kept = f"; {len(r.patches)} kept" if r.patches else ""
        return f"{len(r.upstreamed)} landed{where}{kept}"
    if r.error:
        return r.error.splitlines()[0]
    return counted(len(r.patches), "patch") if r.patches else ""


def _show_landed(ui: UI, r: Report) -> None:
    for u in r.upstreamed:
        where = (f"landed in {Landing(**u['commit']).short()}" if u["commit"] else
                 f"already in {(r.target or '')[:10]} (no shared history to bisect)")
        if u.get("share") is not None:
            where += f" ({round(u['share'] * 100)}% of its added lines"
            changed = [c["sha"][:10] for c in u.get("changed_by", [])]
            where += f"; then changed by {', '.join(changed)})" if changed else ")"
        ui.info(f"{r.patchset}: {u['patch']} is upstream: {where}")


def _show_conflict(ui: UI, r: Report) -> None:
    c = r.conflict
    assert c is not None
    commit = c["commit"]
    ui.info(f"{r.patchset}: {c['patch']} first breaks at upstream commit {commit['sha'][:12]} "
            f"{commit['subject']!r}" + (f" (PR #{commit['pr']})" if commit.get("pr") else ""))
    ui.info(f"  by {commit['author']} on {commit['date']}; found with {counted(r.probes, 'apply probe')}"
            f" over {counted(r.commits, 'commit')}")
    ui.info(f"  {c['reason']} in: {', '.join(c['files']) or '?'}")
    if c.get("evidence", {}).get("by"):
        ui.info(f"  upstream already has part of it: {c['evidence']['summary']}")
    for hunk in c.get("hunks", []):
        ui.info(f"    {hunk}")
    ui.info(f"  resolve in {shown_path(Path(c['worktree']))} (upstream's change: "
            f"{shown_path(Path(c['breaking_diff']))}),")
    ui.info(f"  then `contrib sync --continue {r.patchset}`, or `--abort` to drop it")
