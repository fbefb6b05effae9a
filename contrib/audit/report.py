"""The audit as a JSON document, table rows, and Markdown for a PR or an issue."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from contrib.analysis.headers import cure
from contrib.audit.chains import Chain
from contrib.audit.model import CLASSES, RUNTIME, AuditGate, Mismatch, admits_text, sort_key
from contrib.audit.serial import chain_json, gate_json, mismatch_json
from contrib.ui import counted


@dataclass
class UpstreamAudit:
    """One upstream's audit at one commit (and the commit it was compared with)."""

    name: str
    commit: str
    ref: str
    gates: list[AuditGate]
    since: str | None = None
    since_commit: str | None = None
    seconds: float = 0.0
    cached: bool = False
    notes: list[str] = field(default_factory=list)
    compiled: dict[str, Any] | None = None  # --compile: what nvcc did (ptxcheck.CompileSummary)
    mismatches: list[Mismatch] = field(default_factory=list)  # admitted here, refused below
    stack: list[dict[str, Any]] = field(default_factory=list)  # the upstreams below, as pinned
    features: list[Chain] = field(default_factory=list)  # what each feature comes to

    def excluding(self) -> list[AuditGate]:
        """The gates that turn the target away, runtime first."""
        return sorted((g for g in self.gates if g.excludes_target), key=sort_key)

    def uncovered_runtime(self) -> list[AuditGate]:
        """Excluding runtime gates no patchset covers (what the exit code counts)."""
        return [g for g in self.excluding() if g.scope == RUNTIME and not g.covered_by]

    def counts(self) -> dict[str, int]:
        """Excluding gates by class."""
        found = Counter(g.class_ or "unknown" for g in self.excluding())
        return {k: found[k] for k in CLASSES if found[k]}

    def to_dict(self) -> dict[str, Any]:
        """The upstream's part of the JSON document; every gate, runtime first."""
        return {
            "name": self.name, "commit": self.commit, "ref": self.ref, "since": self.since,
            "since_commit": self.since_commit, "seconds": round(self.seconds, 2),
            "cached": self.cached, "counts": self.counts(), "compile": self.compiled,
            "mismatches": [mismatch_json(m) for m in self.mismatches], "stack": self.stack,
            "features": [chain_json(c) for c in self.features],
            "gates": [gate_json(g) for g in sorted(self.gates, key=sort_key)],
        }


def mismatch_rows(audit: UpstreamAudit) -> list[list[str]]:
    """Rows for the mismatches table: the gate here, the gate below, what happens."""
    rows = []
    for m in audit.mismatches:
        below = m.below
        rows.append([f"{m.file}:{m.line}", m.function,
                     f"{below.upstream} {below.tag} {below.file}:{below.line}",
                     below.function, admits_text(below.admits), m.message])
    return rows


MISMATCH_COLUMNS = ["gate", "function", "below", "function below", "admits below", "what happens"]


def stack_below(audit: UpstreamAudit) -> str:
    """``flashinfer v0.5.3, pinned at python/pyproject.toml:30``, or ""."""
    return "; ".join(f"{s['upstream']} {s['tag']}, pinned at {s['pin']}" for s in audit.stack)


def stack_line(audit: UpstreamAudit) -> str:
    """``sglang: the stack below: flashinfer v0.5.3, pinned at ...``, or ""."""
    return f"{audit.name}: the stack below: {stack_below(audit)}" if audit.stack else ""


def document(arch: str, audits: list[UpstreamAudit]) -> dict[str, Any]:
    """The one JSON document of ``contrib audit --json``."""
    return {"arch": arch, "upstreams": [a.to_dict() for a in audits],
            "uncovered_runtime": sum(len(a.uncovered_runtime()) for a in audits)}


def history_cell(gate: AuditGate) -> str:
    """``opened by abc1234 (#3903)`` / ``closed by ...`` / ``""``."""
    for word, link in (("opened", gate.opened_by), ("closed", gate.closed_by)):
        if link:
            pr = f" (#{link.pr})" if link.pr else ""
            return f"{word} by {link.sha[:10]}{pr}"
    return ""


def table_rows(audit: UpstreamAudit, show_all: bool) -> list[list[str]]:
    """Rows for the table: excluding gates (all with ``show_all``), grouped by class."""
    gates = sorted(audit.gates, key=sort_key) if show_all else audit.excluding()
    return [[g.class_ or "-", g.scope, f"{g.file}:{g.function}", str(g.line), g.kind,
             admits_text(g.admits), g.covered_by or "", history_cell(g),
             g.reason or g.effect.why] for g in gates]


# The gate as FILE:FUNCTION, what `contrib enable` takes: copied whole from a row.
COLUMNS = ["class", "scope", "gate", "line", "kind", "admits", "covered by", "history", "why"]


def summary_line(arch: str, audit: UpstreamAudit) -> str:
    """``flashinfer at v0.6.16 (8da13a29c8): 470 gates, 44 turn sm_120a away: ...``."""
    counts = ", ".join(f"{n} {k}" for k, n in audit.counts().items()) or "none"
    since = f", since {audit.since}" if audit.since else ""
    cached = ", cached" if audit.cached else ""
    built = audit.compiled
    if built:
        cached += (f"; --compile: {counted(built['units'], 'unit')} for {built['compute']}, "
                   f"{built['cached']} from the PTX cache")
        if built.get("missing_headers"):
            cached += ("; some not compiled: install "
                       f"{built.get('missing_hint') or cure(built['missing_headers'])}")
    mismatches = (f", {counted(len(audit.mismatches), 'mismatch', 'mismatches')} with the "
                  "upstream below" if audit.mismatches else "")
    return (f"{audit.name} at {audit.ref} ({audit.commit[:10]}{since}): "
            f"{counted(len(audit.gates), 'gate')}{mismatches}, {len(audit.excluding())} turn {arch} away "
            f"({counts}); "
            f"{len(audit.uncovered_runtime())} uncovered at runtime "
            f"[{audit.seconds:.1f} s{cached}]")


def markdown(arch: str, audits: list[UpstreamAudit], show_all: bool = False) -> str:
    """Text ready for a PR description or an issue."""
    out = [f"## Architecture gates that turn `{arch}` away", ""]
    for audit in audits:
        out += [f"### {audit.name} at `{audit.ref}` ({audit.commit[:10]})", ""]
        counts = ", ".join(f"{n} {k}" for k, n in audit.counts().items()) or "none"
        out += [f"{len(audit.gates)} gates found; {len(audit.excluding())} exclude `{arch}` "
                f"({counts}).", ""]
        out += _markdown_mismatches(audit)
        rows = sorted(audit.gates, key=sort_key) if show_all else audit.excluding()
        if not rows:
            continue
        out += ["| class | scope | gate | function | admits | covered by | history |",
                "|---|---|---|---|---|---|---|"]
        for g in rows:
            cells = [g.class_ or "-", g.scope, f"`{g.file}:{g.line}`", f"`{g.function}`",
                     admits_text(g.admits), g.covered_by or "", history_cell(g)]
            out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        evidence = [g for g in rows if g.evidence]
        for g in evidence:
            out += ["", f"<details><summary>{g.file}:{g.line} ({g.class_})</summary>", ""]
            out += [f"- `{str(e)[:300]}`" for e in g.evidence[:20]]
            out += ["", "</details>"]
        out.append("")
    return "\n".join(out)


def _markdown_mismatches(audit: UpstreamAudit) -> list[str]:
    """The mismatches with the upstream below, first: the target crashes there."""
    if not audit.mismatches:
        return [f"The stack below: {stack_below(audit)}; no mismatch.", ""] if audit.stack else []
    out = [f"**{counted(len(audit.mismatches), 'mismatch', 'mismatches')} with the upstream "
           f"below** ({stack_below(audit)}): admitted here, refused there.", "",
           "| gate | below | admits below |", "|---|---|---|"]
    for row in mismatch_rows(audit):
        cells = [f"`{row[0]}` `{row[1]}`", f"{row[2]} `{row[3]}`", row[4]]
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    out += [""] + [f"- {m.message}" for m in audit.mismatches] + [""]
    return out
