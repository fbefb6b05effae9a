"""Which audited gates a ``contrib enable`` run drafts for.

``FILE:FUNCTION`` or ``FILE:LINE``, as the audit prints them, name gates of
the audit at REF; with none named, every runtime gate that excludes the
target, is gate-only and no patchset covers.  A named gate is draftable when
the audit says it excludes the target, or when what it admits leaves the
target's major out (a value the audit cannot tie to a refusal, such as a
predicate returned to a caller: the user names it, the draft says so).
"""

from __future__ import annotations

from dataclasses import dataclass

from contrib.analysis.tree import SourceTree
from contrib.arch import Arch
from contrib.audit.model import (
    GATE_ONLY,
    NEEDS_KERNEL_WORK,
    RUNTIME,
    AuditGate,
    admits_text,
)
from contrib.enable.places import places
from contrib.errors import UsageError


@dataclass(frozen=True)
class Skipped:
    """A gate not drafted, and why (``refused``: its kernels need work first)."""

    gate: str
    why: str
    refused: bool = False

    def to_dict(self) -> dict[str, str]:
        return {"gate": self.gate, "why": self.why}


def label(gate: AuditGate) -> str:
    """How the audit names a gate: ``file:line`` and its function."""
    return f"{gate.file}:{gate.line} {gate.function}"


def uncovered(gates: list[AuditGate]) -> list[AuditGate]:
    """The gates a run without GATE drafts for: runtime, excluding, gate-only, uncovered."""
    return [g for g in gates if g.scope == RUNTIME and g.excludes_target
            and g.class_ == GATE_ONLY and g.covered_by is None]


def named(gates: list[AuditGate], specs: list[str], arch: Arch, where: str) -> list[AuditGate]:
    """The gates ``specs`` name; UsageError (exit 2) for one that names none, or whose
    gates all admit the target already."""
    picked: list[AuditGate] = []
    for spec in specs:
        found = _matching(gates, spec)
        if not found:
            raise UsageError(f"{spec}: no gate there in {where}; `contrib audit --all` lists "
                             "them as FILE:LINE and FUNCTION")
        closed = [g for g in found if g.excludes_target or g.admits_major(arch.major) is False]
        if not closed:
            raise UsageError(f"{spec}: {label(found[0])} already admits {arch.name} in {where} "
                             f"({found[0].effect.why or admits_text(found[0].admits)}); "
                             "nothing to enable")
        picked += [g for g in closed if g not in picked]
    return picked


def _matching(gates: list[AuditGate], spec: str) -> list[AuditGate]:
    path, sep, what = spec.rpartition(":")
    if not sep or not path or not what:
        raise UsageError(f"{spec}: give a gate as FILE:FUNCTION or FILE:LINE, as the audit "
                         "prints it")
    if what.isdigit():
        line = int(what)
        return [g for g in gates if g.file == path and g.line <= line <= max(g.line, g.end_line)]
    return [g for g in gates if g.file == path
            and what in (g.function, g.function.rsplit(".", 1)[-1])]


def refusal(gate: AuditGate, tree: SourceTree | None = None) -> Skipped | None:
    """A needs-kernel-work gate, refused with where its evidence stands (``file:line``:
    the guards that compile its kernels out, the kernels that omit the target)."""
    if gate.class_ != NEEDS_KERNEL_WORK:
        return None
    said: dict[bool, dict[str, list[str]]] = {True: {}, False: {}}
    for path, line, guard in places(gate.evidence, tree):
        lines = said[guard].setdefault(path, [])
        if line:
            lines.append(str(line))
    guards, others = (_joined(said[True]), _joined(said[False]))
    where = "; ".join(
        ([f"compiled out for the target by the guards at {guards}"] if guards else []) +
        ([f"kernels that omit it at {others}"] if others else [])) or "at unknown lines"
    return Skipped(label(gate), f"needs kernel work: {where} ({gate.reason})", refused=True)


def _joined(by_file: dict[str, list[str]]) -> str:
    """``a.cu:3,9; b.py:120``: a file alone where no line was read."""
    return "; ".join(f"{path}:{','.join(lines)}" if lines else path
                     for path, lines in by_file.items())
