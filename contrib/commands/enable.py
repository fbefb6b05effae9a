"""``contrib enable UPSTREAM --arch ARCH [--at REF] [GATE...] [--name NAME]``.

Options in, outcome out: the engine is :mod:`contrib.enable`.  Exit 0 when every
draft passed the stages that ran (or nothing was left to draft), 1 when a gate
needs kernel work first or a draft failed a stage, 2 on bad input (an unknown
gate or ref, a gate that admits the target already).
"""

from __future__ import annotations

from contrib.arch import parse_arch
from contrib.enable.draft import enable as draft
from contrib.ui import UI, counted
from contrib.workspace.model import Workspace


class _Quiet(UI):
    """validate's own table and JSON stay out of this command's output."""

    def __init__(self) -> None:
        super().__init__(json_mode=True)

    def emit(self, document: object) -> None:
        return None


def enable(ws: Workspace, ui: UI, upstream: str, gates: list[str], *, arch: str,
           at: str | None, name: str | None, fetch: bool) -> int:  # fmt: skip
    """Draft, write and validate; report each draft and each gate left alone."""
    target = parse_arch(arch)
    ws.config.upstream(upstream)  # an unknown name fails before any work
    with ui.task(f"auditing {upstream}") as task:
        run = draft(ws, upstream, target, at=at, specs=gates, name=name, fetch=fetch,
                    check=_Quiet(), progress=ui.progress, step=task.step)
    for done in run.drafted:
        ui.info(f"drafted {done.patchset} at {done.version[:12]}: "
                f"{counted(len(done.patches), 'patch')}, {counted(len(done.gates), 'gate')}; "
                f"validation: {done.verdict}")
        for gate in done.gates:
            ui.info(f"  {gate}")
    for skipped in run.skipped:
        ui.info(f"{'refused' if skipped.refused else 'skipped'} {skipped.gate}: {skipped.why}")
    if not run.drafted and not run.skipped:
        ui.info(f"{upstream} at {run.commit[:12]}: no uncovered gate-only gate turns "
                f"{target.name} away")
    ui.emit(run.to_dict())
    return 1 if run.needs_attention else 0
