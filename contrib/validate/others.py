"""The ``others`` stage: what a patch for the target changes on the archs the upstream ships.

A reviewer's first question of an SM12x patch is whether SM90 and SM100 code
moved.  Two answers, from the patch's own kinds of change:

* **CUDA units.**  Every unit at stake (the PTX stage's: built by a touched
  gate, changed, or including a changed header) is compiled at the base and
  patched for each arch the upstream builds it for
  (:mod:`contrib.analysis.buildarchs`: its JIT list before the patch, else the
  tree's, else sgl-kernel's CMake; ``validation.compare``, else sm_90a and
  sm_100a, where none is read), never the target's own major, and compared
  function by function (:mod:`contrib.validate.otherdiff`).  flashinfer's
  ``< 1200`` guard removal leaves ``compute_90a`` and ``compute_100a``
  identical; an edit that moves an SM90 path is named, kernel by kernel.
* **Python gates.**  Each touched gate's decision on every other capability
  (:func:`contrib.analysis.gates.caps_for`) before and after: widening
  ``supported_major_versions=[9, 10]`` to ``[9, 10, 12]`` moves none.  What the
  whole audit decides for each other arch is not compared (a whole-tree audit
  per arch and tree: minutes, not this stage's cost).

A difference is an error (waivable in ``[[waivers]]``, where the patch means to
change other archs); builds come from the PTX cache, so a repeat compiles nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from contrib.analysis import ptx
from contrib.analysis.buildarchs import ArchLists
from contrib.analysis.gates import TouchedGate, caps_for
from contrib.analysis.ptx_cache import nvcc_identity
from contrib.analysis.ptxbuilds import Build, build_all
from contrib.analysis.ptxjobs import PtxRequest, expand_dirs, unset_dirs_reason
from contrib.analysis.waivers import apply_waivers
from contrib.arch import Arch, admitted_archs, parse_arch
from contrib.record.finding import ERROR, INFO, Finding
from contrib.ui import counted
from contrib.validate.otherdiff import Compared, compare
from contrib.validate.report import FAILED, NOT_APPLICABLE, PASSED, SKIPPED, StageResult

NAME = "others"
DEFAULT_MAJORS = (9, 10)  # sm_90a, sm_100a: compared where the tree says nothing


@dataclass
class OthersRequest:
    """Both trees' builds (``base``: the base tree, its flags, the units it has), the
    patch's touched gates, and why not to compile at all (``held``)."""

    target: Arch
    base: PtxRequest
    patched: PtxRequest
    touched: list[TouchedGate] = field(default_factory=list)
    compare: list[int] = field(default_factory=list)  # validation.compare
    held: str = ""  # the PTX stage found headers missing here


@dataclass(frozen=True)
class Plan:
    """The archs a unit is compared on, and where the list was read."""

    archs: tuple[Arch, ...]
    origin: str


def check(req: OthersRequest) -> StageResult:
    """Compare every unit at stake and every touched gate on the other archs."""
    gates, findings = gate_changes(req.touched, req.target)
    if not req.patched.units:
        return _gates_only(req, gates, findings)
    nvcc = ptx.find_nvcc()
    if nvcc is None:
        return StageResult(NAME, SKIPPED, "nvcc not found on PATH or in /usr/local/cuda/bin")
    if req.held:
        return StageResult(NAME, SKIPPED, f"not compiled: {req.held}")
    extra, unset = expand_dirs(req.patched.extra_dirs)
    if unset:
        return StageResult(NAME, SKIPPED, unset_dirs_reason(unset))
    plans = plan(req)
    if not any(p.archs for p in plans.values()):
        return StageResult(NAME, NOT_APPLICABLE, f"the units at stake are built for sm_{req.target.major}x "
                           "alone", details={"units": _units(plans)})
    profile = req.patched.profile
    computes = {u: [profile.compute(a) for a in p.archs] for u, p in plans.items()}
    identity = nvcc_identity(nvcc)
    base_units = [u for u in req.base.units if req.base.tree.exists(u.path)]
    base = build_all(replace(req.base, units=base_units), nvcc, identity, computes, extra,
                     req.patched.progress)
    patched = build_all(req.patched, nvcc, identity, computes, extra, req.patched.progress)
    compared, held = _compare(req, plans, base, patched, findings)
    findings = apply_waivers(findings, req.patched.waivers)
    builds = [*base.values(), *patched.values()]
    details: dict[str, Any] = {
        "archs": [a.name for a in _archs(plans)],
        "computes": {a.name: profile.compute(a) for a in _archs(plans)},
        "units": _units(plans), "gates": gates,
        "kernels": sum(c.entries for c in compared), "identical": sum(c.identical for c in compared),
        "compared": [{"unit": c.unit, "arch": c.arch, "entries": c.entries,
                      "identical": c.identical} for c in compared],
        "differences": [d.to_dict() for c in compared for d in c.differences],
        "compiled": sum(not b.cached for b in builds), "cached": sum(b.cached for b in builds),
    }
    if held:
        details["missing_headers"] = held
    return _verdict(compared, findings, details, held, gates)


def plan(req: OthersRequest) -> dict[str, Plan]:
    """Each unit's archs to compare on: the upstream's list at the base (the patched
    tree's for a new unit), the target's major left out."""
    lists = {True: ArchLists(req.base.tree, req.touched), False: ArchLists(req.patched.tree, req.touched)}
    plans = {}
    for unit in req.patched.units:
        read = lists[req.base.tree.exists(unit.path)].of(unit.path)
        if read is not None:
            majors, origin = read.majors, read.origin
        elif req.compare:
            majors, origin = tuple(req.compare), "validation.compare (no arch list read)"
        else:
            majors, origin = DEFAULT_MAJORS, "no arch list read: contrib's default"
        archs = tuple(a for a in admitted_archs(majors) if a.major != req.target.major)
        plans[unit.path] = Plan(archs, origin)
    return plans


def _compare(req: OthersRequest, plans: dict[str, Plan], base: dict[tuple[str, str], Build],
             patched: dict[tuple[str, str], Build],
             findings: list[Finding]) -> tuple[list[Compared], dict[str, list[str]]]:
    """Each unit on each of its archs; findings for what differs or no longer compiles;
    the units a header is missing for (unit -> headers)."""
    compared: list[Compared] = []
    held: dict[str, list[str]] = {}
    lines = req.patched.kernel_lines
    for unit, unit_plan in plans.items():
        for arch in unit_plan.archs:
            compute = req.patched.profile.compute(arch)
            old, new = base.get((unit, compute)), patched[(unit, compute)]
            lacking = new.lacking or (old.lacking if old is not None else [])
            if lacking:
                held[unit] = lacking
                continue
            if old is not None and not old.ok:
                findings.append(Finding("other-arch-not-compared", INFO, unit, 1,
                                        f"{unit} does not compile for {arch.name} at the base "
                                        f"({old.first_error}): not compared there"))
                continue
            if not new.ok:
                findings.append(Finding("other-arch-compile-error", ERROR, unit, 1,
                                        f"{unit} no longer compiles for {arch.name}: {new.first_error}"))
                continue
            result = compare(unit, arch.name, old, new)
            compared.append(result)
            for diff in result.differences:
                file, line = lines.get(diff.name.rsplit("::", 1)[-1], (unit, 1))
                findings.append(Finding("other-arch-changed", ERROR, file, line,
                                        f"{arch.name}: {diff.text()}"))
    return compared, held


def _verdict(compared: list[Compared], findings: list[Finding], details: dict[str, Any],
             held: dict[str, list[str]], gates: list[dict[str, Any]]) -> StageResult:
    blocking = [f for f in findings if f.blocking]
    if blocking:
        moved = {c.arch for c in compared if c.differences}
        unchanged = [a for a in details["archs"] if a not in moved
                     and any(c.arch == a for c in compared)]
        text = "; ".join(f.message for f in blocking[:3]) + (
            f" (+{len(blocking) - 3} more)" if len(blocking) > 3 else "")
        tail = f"; unchanged for {', '.join(unchanged)}" if unchanged and compared else ""
        return StageResult(NAME, FAILED, f"changed elsewhere: {text}{tail}", findings, details=details)
    if held:
        headers = list(dict.fromkeys(h for hs in held.values() for h in hs))
        return StageResult(NAME, SKIPPED, f"nvcc cannot find {counted(len(headers), 'header')} "
                           f"({', '.join(headers[:3])}) for {counted(len(held), 'unit')}",
                           findings, details=details)
    if not compared:
        return StageResult(NAME, SKIPPED, "no unit compiled at both the base and patched for "
                           "another arch", findings, details=details)
    per_arch: dict[str, int] = {}
    for item in compared:
        per_arch[item.arch] = per_arch.get(item.arch, 0) + item.identical
    counts = set(per_arch.values())
    same = (f"{counted(counts.pop(), 'kernel')} identical on each" if len(counts) == 1
            else ", ".join(f"{n} on {a}" for a, n in per_arch.items()) + " kernels identical")
    units = len({c.unit for c in compared})
    reason = f"unchanged for {', '.join(per_arch)}: {same} ({counted(units, 'unit')})"
    if gates:
        reason += f"; {_gates_text(gates)}"
    waived = sum(1 for f in findings if f.waived is not None)
    return StageResult(NAME, PASSED, reason + (f" ({waived} waived)" if waived else ""),
                       findings, details=details)


def _gates_only(req: OthersRequest, gates: list[dict[str, Any]],
                findings: list[Finding]) -> StageResult:
    """A patch with no CUDA unit at stake: the touched gates alone."""
    details = {"gates": gates}
    if not req.touched:
        return StageResult(NAME, NOT_APPLICABLE, "the patch touches no CUDA unit and no "
                           "architecture gate", details=details)
    findings = apply_waivers(findings, req.patched.waivers)
    blocking = [f for f in findings if f.blocking]
    if blocking:
        return StageResult(NAME, FAILED, "changed elsewhere: " + "; ".join(
            f.message for f in blocking[:3]), findings, details=details)
    if not gates:
        return StageResult(NAME, SKIPPED, "no touched gate could be compared (a new gate, or "
                           "one contrib cannot read)", findings, details=details)
    return StageResult(NAME, PASSED, _gates_text(gates), findings, details=details)


def _gates_text(gates: list[dict[str, Any]]) -> str:
    others = list(dict.fromkeys(a for g in gates for a in g["other_archs"]))
    span = f" ({others[0]} to {others[-1]})" if len(others) > 1 else ""
    return (f"{counted(len(gates), 'touched gate')} {'decides' if len(gates) == 1 else 'decide'} "
            f"the {counted(len(others), 'other arch', 'other archs')}{span} as before")


def gate_changes(touched: Sequence[TouchedGate],
                 target: Arch) -> tuple[list[dict[str, Any]], list[Finding]]:
    """Each touched gate's decision on every capability outside the target's major,
    before and after: the gates compared, an error for each capability it moves."""
    caps = sorted(c for c in caps_for() if c[0] != target.major)
    names = {c: parse_arch(f"{c[0]}.{c[1]}").name for c in caps}
    rows: list[dict[str, Any]] = []
    findings: list[Finding] = []
    for gate in touched:
        after, before = gate.after, gate.before
        said = f"in {after.function}: `{' '.join(after.text.split())}`"
        if before is None or before.admits is None or after.admits is None:
            why = "is new" if before is None else "is not a value contrib reads"
            findings.append(Finding("gate-not-compared", INFO, after.file, after.line,
                                    f"{said} {why}: its decision on other archs is not compared"))
            continue
        moved = [c for c in caps if before.admits.admits(*c) != after.admits.admits(*c)]
        rows.append({"location": f"{after.file}:{after.line}", "function": after.function,
                     "other_archs": [names[c] for c in caps],
                     "moved": [{"arch": names[c], "before": before.admits.admits(*c),
                                "after": after.admits.admits(*c)} for c in moved]})
        for cap in moved:
            was = before.admits.admits(*cap)
            findings.append(Finding("gate-changed-elsewhere", ERROR, after.file, after.line,
                                    f"{said} {'admitted' if was else 'rejected'} {names[cap]} "
                                    f"before the patch and {'rejects' if was else 'admits'} it after"))
    return rows, findings


def _archs(plans: dict[str, Plan]) -> list[Arch]:
    return sorted({a for p in plans.values() for a in p.archs}, key=lambda a: a.cuda_arch)


def _units(plans: dict[str, Plan]) -> list[dict[str, Any]]:
    return [{"path": u, "archs": [a.name for a in p.archs], "arch_list": p.origin}
            for u, p in plans.items()]
