"""Which audited gates a ``contrib enable`` run drafts for, and why one is refused.

``FILE:FUNCTION`` or ``FILE:LINE``, as the audit prints them, name gates of
the audit at REF; with none named, every runtime gate that excludes the
target, is gate-only and no patchset covers.  A named gate is draftable when
the audit says it excludes the target, or when what it admits leaves the
target's major out (a value the audit cannot tie to a refusal, such as a
predicate returned to a caller: the user names it, the draft says so).

A feature (``--feature``) names the gates its chain opens here, as ``contrib why``
reads it (:func:`~contrib.audit.feature.chain.chain_of`, then
:func:`~contrib.audit.feature.chain.to_open`): enable reads the same chain through
the same audit (its cache answers both) and opens exactly those gates, not the wider
chain a gate's own draft would add (flashinfer's ``gen_moe_utils_module`` at
fb28d7242b is also loaded by a CuTe DSL finalize-fusion path that needs kernel work,
which the feature's way never meets).

A refusal names where the audit's evidence stands, ``file:line``: the ``#if`` guard
that compiles the kernels out, a finding's line, or for a thing kept by name (a CuTe
DSL kernel: ``where`` is its file and qualified name,
``..._finalize_fusion.py Sm100BlockScaledContiguousGroupedGemmFinalizeFusionKernel.__call__``)
the line of its ``def`` or ``class`` in the tree.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Callable
from dataclasses import dataclass, field

from contrib.analysis.pyparse import parse_python
from contrib.analysis.tree import SourceTree
from contrib.arch import Arch
from contrib.audit.chains import Chain, Feature, Verdict
from contrib.audit.feature.chain import to_open
from contrib.audit.feature.show import VERDICT_TEXT, drafts_name, find
from contrib.audit.model import (
    GATE_ONLY,
    NEEDS_KERNEL_WORK,
    RUNTIME,
    AuditGate,
    Evidence,
    admits_text,
)
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


# -- a feature's gates ---------------------------------------------------------------


def picker(wanted: list[str], seen: list[str]) -> Callable[[list[Feature]], list[Feature]]:
    """The audit's choice of features: those ``wanted`` names (as ``contrib why`` finds
    them); ``seen`` gets every feature's name, for a did-you-mean."""
    def choose(features: list[Feature]) -> list[Feature]:
        seen[:] = [f.name for f in features]
        found: list[Feature] = []
        for one in wanted:
            found += [f for f in find(features, one) if f not in found]
        return found
    return choose


@dataclass
class FeatureGates:
    """This upstream's gates that the features' chains open, in the order met, the
    drafts' default name, and why nothing is drafted (``skipped``: a chain that is not
    gate-only, or one opening no gate here)."""

    gates: list[AuditGate] = field(default_factory=list)
    name: str = ""
    skipped: list[Skipped] = field(default_factory=list)


def feature_gates(upstream: str, gates: list[AuditGate], chains: list[Chain],
                  arch: str) -> FeatureGates:
    """What drafting ``chains`` (the chosen features of ``upstream``) opens here."""
    out = FeatureGates(name=drafts_name([c.feature for c in chains]))
    by_place = {(g.file, g.line): g for g in gates}
    for chain in chains:
        if chain.verdict != Verdict.GATE_ONLY:
            out.skipped.append(Skipped(chain.feature.name, _not_gate_only(chain, arch)))
            continue
        spots = to_open(chain)
        here = spots.get(upstream, [])
        if not here:
            elsewhere = ", ".join(spots) or "no upstream"
            out.skipped.append(Skipped(chain.feature.name, f"opens no gate of {upstream}: its "
                                       f"gates are in {elsewhere} (`contrib why` prints the "
                                       "command for each)"))
            continue
        for link in chain.links:
            gate = by_place.get((link.file, link.line))
            if (link.upstream == upstream and link.spot in here and gate is not None
                    and gate not in out.gates):
                out.gates.append(gate)
    if out.skipped:  # one feature is one fix: none of it drafted when a part cannot be
        out.gates = []
    return out


def _not_gate_only(chain: Chain, arch: str) -> str:
    """Why a feature's chain drafts nothing: its verdict, and where it stops."""
    if chain.verdict == Verdict.ON:
        return f"on for {arch} already: nothing to open"
    return f"{VERDICT_TEXT[chain.verdict]} for {arch}: {chain.reason}"


def no_feature(upstream: str, ref: str, wanted: list[str], seen: list[str]) -> str:
    """One line for features ``upstream`` does not declare, with the close names."""
    close = [c for one in wanted for c in difflib.get_close_matches(one, seen, n=3, cutoff=0.75)]
    hint = (f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else
            f"; `contrib audit {upstream}` lists its features")
    return f"{upstream} at {ref} declares no feature {' or '.join(map(repr, wanted))}{hint}"


# -- where a refusal's evidence stands -------------------------------------------------


def places(evidence: tuple[Evidence, ...], tree: SourceTree | None = None
           ) -> list[tuple[str, int, bool]]:
    """Each evidence's ``(file, line, guard)`` in order, each once: its ``#if`` guard
    (``guard`` True), its own line, or the line of the ``def`` or ``class`` it names
    in ``tree`` (0: none read); a file of the upstream below is named with it
    (``flashinfer:csrc/x.cu``), its line as the audit kept it."""
    found: list[tuple[str, int, bool]] = []
    for one in evidence:
        at = one.at
        if at is not None:
            path, line = at.path, at.line
        else:
            path, line = _named(one, tree if not one.upstream else None)
        shown = f"{one.upstream}:{path}" if one.upstream and one.guard is None else path
        where = (shown, line, one.guard is not None)
        if where not in found:
            found.append(where)
    return found


def _named(one: Evidence, tree: SourceTree | None) -> tuple[str, int]:
    """The file and line of a line-less evidence: ``path``, or ``where``'s file when
    it starts with one of ``tree``, and the line of the name that follows it."""
    path, rest = one.path, ""
    head, _, tail = one.where.partition(" ")
    if not path and tree is not None and head.endswith(".py") and tree.read_text(head):
        path, rest = head, tail.strip()
    elif path and one.where.startswith(f"{path} "):
        rest = one.where[len(path) + 1:].strip()
    if not path:
        return one.where, 0
    if not rest or tree is None:
        return path, 0
    return path, defined_at(tree, path, rest)


def defined_at(tree: SourceTree, path: str, dotted: str) -> int:
    """The line of the ``def`` or ``class`` ``dotted`` names in ``path`` (``Cls.__call__``:
    the method of the class), else of its last part alone; 0 when none."""
    module = parse_python(path, tree.read_text(path) or "")
    if not isinstance(module, ast.Module):
        return 0
    parts = dotted.split(".")
    scope: list[ast.stmt] = module.body
    line = 0
    for part in parts:
        node = next((n for n in scope if isinstance(n, ast.ClassDef | ast.FunctionDef |
                                                    ast.AsyncFunctionDef) and n.name == part),
                    None)
        if node is None:
            break
        line, scope = node.lineno, node.body
    else:
        return line
    last = next((n for n in ast.walk(module) if isinstance(
        n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and n.name == parts[-1]), None)
    return last.lineno if last is not None else line
