"""``contrib refresh UPSTREAM/NAME [--path DIR | --repo CLONE] [--no-fetch]``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contrib.carry import refresh as engine
from contrib.ui import UI, counted
from contrib.workspace.model import Workspace


def refresh(ws: Workspace, ui: UI, target: str, *, path: Path | None, repo: Path | None,
            fetch: bool) -> int:
    """Take the edit branch back as the patchset's current version and say what changed."""
    _show(ui, engine.refresh(ws, target, path=path, repo=repo, fetch=fetch,
                             progress=ui.progress))
    return 0


def _show(ui: UI, doc: dict[str, Any]) -> None:
    target, result = doc["patchset"], doc["result"]
    if doc.get("untracked"):
        ui.warn(f"{target}: not taken (never committed): {', '.join(doc['untracked'][:5])}"
                + (" ..." if len(doc["untracked"]) > 5 else "") + "; git add and commit "
                "them, then refresh again")
    if result == engine.UNCHANGED:
        ui.info(f"{target}: unchanged: {doc['branch']} holds the current version's patches")
    else:
        where = "at" if result == engine.REPLACED else "a new version at"
        ui.info(f"{target}: {result}: {counted(len(doc['patches']), 'patch')}, {where} "
                f"{doc['version'][:12]}")
        if doc["superseded"]:
            ui.info(f"  the old patches and validation.json are kept in {doc['superseded']}")
        if doc.get("validation_set_aside"):
            ui.info(f"  validation.json was set aside: run `contrib validate {target}`")
        ui.info(doc["range_diff"] or "  (no range-diff: the old version could not be built)")
    ui.emit(doc)
