"""``contrib sync [TARGET...] [--to REV] [--commit] [--continue | --abort]``."""

from __future__ import annotations

from contrib.carry import sync as engine
from contrib.carry.report import show
from contrib.ui import UI
from contrib.workspace.model import Workspace


def sync(ws: Workspace, ui: UI, targets: list[str], *, to: str | None, commit: bool,
         continue_: bool, abort: bool, fetch: bool) -> int:
    """Carry the selected patchsets and show the outcome; 0 all carried, 1 needs the user."""
    outcome = engine.sync(ws, ui, targets, to=to, commit=commit, continue_=continue_,
                          abort=abort, fetch=fetch)
    if outcome.aborted is not None:
        for pending in outcome.aborted:
            ui.info(f"{pending.patchset}: aborted; removed {pending.worktree}")
        ui.emit({"aborted": [p.patchset for p in outcome.aborted]})
    elif outcome.message is not None:
        ui.info(outcome.message)
        ui.emit({"results": [], "commit": None, "message": outcome.message})
    else:
        show(ui, outcome.reports, outcome.committed)
    return 0 if outcome.ok else 1
