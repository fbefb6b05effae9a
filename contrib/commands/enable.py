"""``contrib enable UPSTREAM --arch ARCH [--at REF] [GATE... [--only] | --feature F] [--name NAME]``.

Options in, outcome out: the engine is :mod:`contrib.enable`.  Exit 0 when every
draft passed the stages that ran (or a run naming nothing found nothing left to
draft), 1 when a gate needs kernel work first, a draft failed a stage, or nothing
was drafted of the gates or feature named (each skipped line says why), 2 on bad
input (an unknown gate, feature or ref, a gate that admits the target already).
"""

from __future__ import annotations

from pathlib import Path

from contrib.arch import parse_arch
from contrib.enable.draft import Drafted
from contrib.enable.draft import enable as draft
from contrib.ui import UI, counted, shown_path
from contrib.workspace.model import Workspace


class _Quiet(UI):
    """validate's own table and JSON stay out of this command's output."""

    def __init__(self) -> None:
        super().__init__(json_mode=True)

    def emit(self, document: object) -> None:
        return None


def enable(ws: Workspace, ui: UI, upstream: str, gates: list[str], *, arch: str | None,
           at: str | None, name: str | None, fetch: bool,
           force: bool = False, requires: list[str] | None = None,
           features: list[str] | None = None, only: bool = False) -> int:
    """Draft, write and validate; report each draft and each gate left alone."""
    target = parse_arch(ws.config.default_arch(arch, "enable"))
    ws.config.upstream(upstream)  # an unknown name fails before any work
    with ui.task(f"auditing {upstream}") as task:
        run = draft(ws, upstream, target, at=at, specs=gates, name=name, fetch=fetch,
                    check=_Quiet(), progress=ui.progress, step=task.step, force=force,
                    requires=requires or (), features=features or (), only=only)
    for done in run.drafted:
        _show(ui, done, target.name)
    for skipped in run.skipped:
        ui.info(f"{'refused' if skipped.refused else 'skipped'} {skipped.gate}: {skipped.why}")
    if any(s.refused for s in run.skipped):
        ui.info("  a gate the audit refuses needs its kernels fixed too: `--force` drafts "
                "the gate's half of that fix, which validate fails until then")
    if not run.drafted and not run.skipped:
        ui.info(f"{upstream} at {run.commit[:12]}: no uncovered gate-only gate turns "
                f"{target.name} away")
    elif run.asked and not run.drafted:  # each skipped line above says why
        ui.info(f"nothing drafted for {upstream} at {run.commit[:12]}")
    ui.emit(run.to_dict())
    return 1 if run.needs_attention else 0


def _show(ui: UI, done: Drafted, arch: str) -> None:
    """One draft: what it opens, where its patches are, what validate said and what
    to run next."""
    skipped = f" (skipped: {', '.join(done.skipped)})" if done.skipped else ""
    ui.info(f"drafted {done.patchset} at {done.version[:12]}: "
            f"{counted(len(done.patches), 'patch')}, {counted(len(done.gates), 'gate')}; "
            f"validation: {done.verdict}{skipped}")
    for gate in done.gates:
        ui.info(f"  opens {gate}")
    if done.overridden:
        ui.info(f"  drafted past the audit's refusal (--force): {done.overridden}")
    if done.unproven:
        ui.warn(f"{done.patchset}: gate-only stands on the #if guards alone here: the ptx "
                f"stage was skipped ({done.unproven}); nothing proves {arch} gets real kernels")
    if done.folder:
        ui.info(f"  patches in {shown_path(Path(done.folder))}")
    ui.info(f"  next: {_next(done, arch)}")


def _next(done: Drafted, arch: str) -> str:
    """The command to run next, for the verdict the draft got."""
    target = done.patchset
    if done.verdict == "failed" or done.unmet:
        stages = ", ".join(done.unmet) or "the failed stages"
        return (f"fix what {stages} name (`contrib edit {target}`), then "
                f"`contrib validate {target}`")
    if done.verdict == "passed":
        return f"`contrib open-pr {target}`"
    if done.skipped:
        return (f"`contrib validate {target}` on a machine with a GPU of {arch} (for "
                f"{', '.join(done.skipped)}), then `contrib open-pr {target}`")
    return f"`contrib validate {target}`, then `contrib open-pr {target}`"
