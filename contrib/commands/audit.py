"""``contrib audit [UPSTREAM...] --arch ARCH[,ARCH...]``: every gate that turns the target away.

Options in, outcome out: the audit itself lives in :mod:`contrib.audit`.  Exit 0
when no uncovered gate turns the target away at runtime and no gate admits it
where the upstream below refuses it (a mismatch), 1 otherwise; bad input
(an unknown upstream or ref, an arch that does not parse) exits 2.  Several
archs (a family: ``sm_120a,sm_121a``) are audited each in turn and their
features put side by side.
"""

from __future__ import annotations

from contrib.arch import parse_archs
from contrib.audit.chains import Verdict
from contrib.audit.classing.ptxcheck import find_compiler
from contrib.audit.feature.explain import every
from contrib.audit.feature.show import (
    FEATURE_COLUMNS,
    family_rows,
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
from contrib.ui import UI, counted
from contrib.workspace.model import Workspace


def audit(ws: Workspace, ui: UI, upstreams: list[str], *, arch: str | None, at: str | None,
          since: str | None, fetch: bool, show_all: bool, as_markdown: bool,
          compile_ptx: bool = False, gates: bool = False, classes: tuple[str, ...] = (),
          scopes: tuple[str, ...] = (), verdicts: tuple[str, ...] = ()) -> int:
    """Audit each upstream (all of the workspace's when none is named) for each arch
    of ``arch`` and report: one row per feature first (``gates``: the gate rows
    instead), filtered by class, scope and verdict; for several archs, the features
    side by side (the gate rows and Markdown of each arch in turn)."""
    targets = list(dict.fromkeys(parse_archs(ws.config.default_arch(arch, "audit"))))
    names = list(dict.fromkeys(upstreams)) or sorted(ws.config.upstreams)
    for name in names:
        ws.config.upstream(name)  # an unknown name fails before any work
    nvcc = find_compiler() if compile_ptx else None
    runs: list[tuple[str, list[UpstreamAudit]]] = []
    for target in targets:
        audits: list[UpstreamAudit] = []
        for name in names:
            label = f"auditing {name}" + (f" for {target.name}" if len(targets) > 1 else "")
            with ui.task(label) as task:
                audits.append(audit_upstream(ws, name, target, at=at, since=since, fetch=fetch,
                                             progress=ui.progress, step=task.step, nvcc=nvcc,
                                             features=None if gates else every))
        runs.append((target.name, audits))
    with ui.paged():
        if len(runs) > 1 and not (gates or as_markdown):
            _family(ui, runs, {Verdict(v) for v in verdicts})
        else:
            for name, audits in runs:
                _report(ui, audits, name, as_markdown=as_markdown, show_all=show_all,
                        gates=gates, classes=classes, scopes=scopes, verdicts=verdicts)
    for note in dict.fromkeys(n for _, audits in runs for one in audits for n in one.notes):
        ui.warn(note)
    documents = [document(name, audits) for name, audits in runs]
    ui.emit(documents[0] if len(documents) == 1 else {"archs": documents})
    return 1 if any(a.uncovered_runtime() or a.mismatches
                    for _, audits in runs for a in audits) else 0


def _family(ui: UI, runs: list[tuple[str, list[UpstreamAudit]]], verdicts: set[Verdict]) -> None:
    """A family side by side, per upstream: each arch's summary and mismatches, then
    one row per feature with its verdict on each arch, those that differ first."""
    archs = [name for name, _ in runs]
    for n, first in enumerate(runs[0][1]):
        results = [(name, audits[n]) for name, audits in runs]
        for name, one in results:
            ui.info(summary_line(name, one))
        if first.stack:
            ui.info(stack_line(first))
        for name, one in results:
            if one.mismatches:
                ui.table(f"mismatches of {one.name} on {name}", MISMATCH_COLUMNS,
                         mismatch_rows(one), wrap=("function", "function below", "what happens"))
        if not first.features:
            continue
        rows, differ = family_rows(results, verdicts or None)
        if rows:
            ui.table(f"features of {first.name} side by side", ["feature", *archs], rows,
                     keys=("feature",))
        said = f": {', '.join(differ[:5])}" + (f" and {len(differ) - 5} more"
                                                if len(differ) > 5 else "") if differ else ""
        turned = [{g.key: g.excludes_target for g in one.gates} for _, one in results]
        apart = sum(1 for key in turned[0] if len({t.get(key) for t in turned}) > 1)
        ui.info(f"{first.name}: {len(first.features)} features, {len(differ)} of them differ "
                f"between {' and '.join(archs)}{said}; {counted(apart, 'gate')} "
                f"turn{'s' if apart == 1 else ''} one away and not another (`contrib why {first.name} FEATURE --arch "
                f"{','.join(archs)}` gives each chain; --gates lists each arch's gates)")


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
