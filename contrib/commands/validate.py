"""``contrib validate [TARGET...] [--arch ARCH] [--junit FILE] [--out FILE] [--json]``
``contrib validate --merge FILE...`` and ``contrib validate [TARGET...] --drop RUN``."""

from __future__ import annotations

from pathlib import Path

from contrib.ui import UI
from contrib.validate import run as engine
from contrib.workspace.model import Workspace


def validate(ws: Workspace, ui: UI, targets: list[str], *, arch: str | None,
             junit: Path | None, out: Path | None = None) -> int:
    """Validate the targets' current versions; 1 when a stage failed or a required one
    did not pass."""
    code, document = engine.validate(ws, ui, targets, arch=arch, junit=junit, out=out)
    ui.emit(document)
    return code


def merge(ws: Workspace, ui: UI, files: list[Path]) -> int:
    """Merge run files written by ``--out`` into their versions' records."""
    ui.emit(engine.merge(ws, ui, files))
    return 0


def drop(ws: Workspace, ui: UI, targets: list[str], ids: list[str]) -> int:
    """Remove runs from the records of the targets' current versions."""
    ui.emit(engine.drop(ws, ui, targets, ids))
    return 0
