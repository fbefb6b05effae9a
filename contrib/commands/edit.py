"""``contrib edit UPSTREAM/NAME [--path DIR | --repo CLONE] [--force]``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contrib.carry.edit import open_edit
from contrib.carry.edits import Edit
from contrib.carry.rangediff import Built
from contrib.git.repo import Sha
from contrib.ui import UI, counted
from contrib.workspace.model import Workspace


def edit(ws: Workspace, ui: UI, target: str, *, path: Path | None, repo: Path | None,
         force: bool) -> int:
    """Open the current version of ``target`` as a branch to change with git."""
    opened = open_edit(ws, target, path=path, repo=repo, force=force, progress=ui.progress)
    _show(ui, opened.record, opened.where, opened.built, opened.moved)
    return 0


def _show(ui: UI, record: Edit, where: Path, built: Built, moved: bool) -> None:
    verb = "opened" if moved else "already open"
    ui.info(f"{record.patchset}: {verb} as branch {record.branch} in {where}")
    ui.info(f"  {counted(len(built.commits), 'commit')} on {record.base[:12]}:")
    for applied in built.commits:
        ui.info(f"    {applied.commit[:12]} {applied.patch.subject}")
    ui.info(f"  change them with git (commit --amend, rebase -i, new commits, rebase onto "
            f"another upstream commit), then `contrib refresh {record.patchset}`")
    doc: dict[str, Any] = {
        "patchset": record.patchset, "mode": record.mode, "path": str(where),
        "branch": record.branch, "base": record.base, "version": record.version,
        "commits": [{"sha": a.commit, "patch": a.name, "subject": a.patch.subject}
                    for a in built.commits],
        "changed": moved, "tip": Sha(record.tip)}
    ui.emit(doc)
