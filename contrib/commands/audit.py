"""``contrib audit [UPSTREAM...] --arch ARCH``: every gate that turns the target away.

Options in, outcome out: the audit itself lives in :mod:`contrib.audit`.  Exit 0
when no uncovered gate turns the target away at runtime and no gate admits it
where the upstream below refuses it (a mismatch), 1 otherwise; bad input
(an unknown upstream or ref, an arch that does not parse) exits 2.
"""

from __future__ import annotations

from contrib.arch import parse_arch
from contrib.audit.classing.ptxcheck import find_compiler
from contrib.audit.feature.chain import Verdict
from contrib.audit.feature.explain import every
from contrib.audit.feature.show import (
    FEATURE_COLUMNS,
    feature_markdown,
    feature_rows,
    feature_summary,
    read_at,
    shown,
)
from contrib.audit.report import (
    COLUMNS,
    MISMATCH_COLUMNS,
    UpstreamAudit,
    document,
    markdown,
    mismatch_rows,
    stack_line,
    summary_line,
    table_rows,
)
from contrib.audit.run import audit_upstream
from contrib.ui import UI
from contrib.workspace.model import Workspace


def audit(ws: Workspace, ui: UI, upstreams: list[str], *, arch: str | None, at: str | None,
          since: str | None, fetch: bool, show_all: bool, as_markdown: bool,
          compile_ptx: bool = False, gates: bool = False, classes: tuple[str, ...] = (),
          scopes: tuple[str, ...] = (), verdicts: tuple[str, ...] = ()) -> int:
    """Audit each upstream (all of the workspace's when none is named) and report: one
    row per feature first (``gates``: the gate rows instead), filtered by class, scope
    and verdict."""
    target = parse_arch(ws.config.default_arch(arch, "audit"))
    names = list(dict.fromkeys(upstreams)) or sorted(ws.config.upstreams)
    for name in names:
        ws.config.upstream(name)  # an unknown name fails before any work
    nvcc = find_compiler() if compile_ptx else None
    audits: list[UpstreamAudit] = []
    for name in names:
        with ui.task(f"auditing {name}") as task:
            audits.append(audit_upstream(ws, name, target, at=at, since=since, fetch=fetch,
                                         progress=ui.progress, step=task.step, nvcc=nvcc,
                                         features=None if gates else every))
    with ui.paged():
        _report(ui, audits, target.name, as_markdown=as_markdown, show_all=show_all,
                gates=gates, classes=classes, scopes=scopes, verdicts=verdicts)
    for one in audits:
        for note in one.notes:
            ui.warn(note)
    ui.emit(document(target.name, audits))
    return 1 if any(a.uncovered_runtime() or a.mismatches for a in audits) else 0


def _report(ui: UI, audits: list[UpstreamAudit], arch: str, *, as_markdown: bool,
            show_all: bool, gates: bool, classes: tuple[str, ...], scopes: tuple[str, ...],
            verdicts: tuple[str, ...]) -> None:
    """The human report: Markdown, or per upstream its summary, mismatches and table."""
    if as_markdown:  # the features first, as on a terminal; then every gate
        features: list[str] = []
        for one in audits:
            if not gates and one.features:
                features += feature_markdown(one.name, one.ref, one.features, arch,
                                             read_at(one))
        if features:
            features = [f"## Features on `{arch}`", "", *features]
        ui.info("\n".join([*features, markdown(arch, audits, show_all)]))
    else:
        for one in audits:
            ui.info(summary_line(arch, one))
            if one.stack:
                ui.info(stack_line(one))
            if one.mismatches:  # first: the target is sent where the upstream below refuses it
                ui.table(f"mismatches of {one.name} with the upstream below", MISMATCH_COLUMNS,
                         mismatch_rows(one), wrap=("function", "function below", "what happens"))
            if not gates and one.features:  # a tree declaring no feature: its gates
                _features(ui, one, arch, {Verdict(v) for v in verdicts})
                continue
            rows = [row for row in table_rows(one, show_all)
                    if (not classes or row[0] in classes) and (not scopes or row[1] in scopes)]
            if rows:
                ui.table(f"audit {one.name}", COLUMNS, rows,
                         wrap=("kind", "admits", "covered by", "history", "why"),
                         keys=("gate",))
        if len(audits) == 1 and not gates and audits[0].features:
            ui.info(summary_line(arch, audits[0]))  # again: the table scrolled it away


def _features(ui: UI, one: UpstreamAudit, arch: str, verdicts: set[Verdict]) -> None:
    """The feature table: one row per feature with a gate on its way, worst first."""
    at = read_at(one)
    kept = shown(one.features, verdicts or None)
    if kept:
        ui.table(f"features of {one.name}", FEATURE_COLUMNS, feature_rows(kept, arch, at),
                 wrap=("next",), keys=("feature",))
    ui.info(feature_summary(one.name, one.features, len(kept)) +
            f" (`contrib why {one.name} FEATURE` gives a feature's whole chain; --verdict "
            "VERDICT lists those of one verdict; --gates lists the gates)")
