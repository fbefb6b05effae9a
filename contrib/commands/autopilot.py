"""``contrib autopilot [TARGET...] [--push] [--dry-run] [--no-fetch] [--json]``."""

from __future__ import annotations

from typing import Any

from contrib.autopilot import run as engine
from contrib.autopilot.state import Outcome, Run
from contrib.forge.api import ForgeFactory
from contrib.ui import UI
from contrib.workspace.model import Workspace


def autopilot(ws: Workspace, ui: UI, targets: list[str], *, push: bool, dry_run: bool,
              fetch: bool, gpu_missing: list[str],
              forge_factory: ForgeFactory | None = None) -> int:
    """Run the loop once and show it; 0 when nothing needs a person, 1 when something does."""
    outcomes, run = engine.autopilot(ws, ui, targets, push=push, dry_run=dry_run, fetch=fetch,
                                     gpu_missing=gpu_missing, forge_factory=forge_factory)
    code = 1 if run.needs(outcomes) else 0
    _show(ui, outcomes, run, code)
    return code


def _show(ui: UI, outcomes: list[Outcome], run: Run, code: int) -> None:
    rows = [[o.patchset, o.cell("sync"), o.cell("validate"), o.cell("pr"),
             "; ".join(n.text.splitlines()[0] for n in o.needs) or "-"] for o in outcomes]
    ui.table("autopilot" + (" (dry run: nothing written)" if run.dry_run else ""),
             ["patchset", "sync", "validation", "PR", "needs you"], rows)
    if run.commit:
        ui.info(f"committed {run.commit[:12]}" + (f"; push: {run.push}" if run.push else ""))
    for need in run.problems:
        ui.warn(need.text)
    if run.dashboard:
        detail = run.dashboard.get("url") or run.dashboard.get("reason") or ""
        ui.info(f"dashboard: {run.dashboard.get('result')}" + (f" ({detail})" if detail else ""))
    if not outcomes:
        ui.info("no patchsets selected")
    if run.dry_run:
        for call in [*(f"commit {f}" for f in run.would_commit), *run.forges.writes()]:
            ui.info(f"would: {call}")
    document: dict[str, Any] = {
        "dry_run": run.dry_run, "exit_code": code, "commit": run.commit, "push": run.push,
        "dashboard": run.dashboard, "problems": [n.as_dict() for n in run.problems],
        "patchsets": [o.as_dict() for o in outcomes],
        "audit": [v.to_dict() for v in run.audits],
        "enable": [{"arch": arch, **one.to_dict()} for arch, one in run.drafts],
        "proposals": [p.to_dict() for p in run.proposals]}
    if run.dry_run:
        document.update(would_commit=run.would_commit, would_write=run.forges.writes())
    ui.emit(document)
