"""The PTX stage's work: every unit at stake, compiled as the upstream builds it, cached.

:func:`check` is what ``stage_ptx`` runs when patchset.toml gives no
``validation.compile`` command: the units of :mod:`contrib.analysis.units`,
the nvcc flags the upstream's build code passes at the commit
(:mod:`contrib.analysis.buildflags`; the touched gates' own and
``validation.ptx_flags`` add to them), the arch variant from
:mod:`contrib.analysis.profiles`, headers searched in the patched tree
first, then the upstream's submodules when the cache has them, then the headers
an installed upstream package ships to the validation interpreter, then
``validation.ptx_include_dirs``; compiled in parallel through
:mod:`contrib.analysis.ptxrun`, the path ``audit --compile`` takes too.
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from contrib.analysis import ptx
from contrib.analysis.headers import cure
from contrib.analysis.includes import IncludeResolver, include_closure
from contrib.analysis.ptx import Outcome
from contrib.analysis.ptx_cache import compile_for, empty_everywhere
from contrib.analysis.ptxjobs import PtxRequest, expand_dirs, unset_dirs_reason
from contrib.analysis.ptxneeds import LackKind, shared_limit
from contrib.analysis.ptxrun import compile_units
from contrib.analysis.smemlaunch import sites
from contrib.analysis.submodules import hint
from contrib.analysis.waivers import apply_waivers
from contrib.arch import Arch
from contrib.record.finding import ERROR, INFO, Finding
from contrib.ui import counted
from contrib.validate.report import FAILED, NOT_APPLICABLE, PASSED, SKIPPED, StageResult
from contrib.workspace.validation import Waiver


def check(req: PtxRequest) -> StageResult:
    """Compile every unit for the upstream's variant of ``req.arch``; fail on empty kernels."""
    if not req.units:
        return StageResult("ptx", NOT_APPLICABLE, "no CUDA translation unit at stake (no .cu built by a "
                           "touched gate, changed, or including a changed header)")
    nvcc = ptx.find_nvcc()
    if nvcc is None:
        return StageResult("ptx", SKIPPED, "nvcc not found on PATH or in /usr/local/cuda/bin")
    extra, unset = expand_dirs(req.extra_dirs)
    if unset:
        return StageResult("ptx", SKIPPED, unset_dirs_reason(unset))
    compute = req.profile.compute(req.arch)
    sass = cuobjdump()
    done = compile_units(req, nvcc, {}, extra, sass)
    jobs, outcomes = done.jobs, done.outcomes
    # An entry empty for the target is compared with the arch admitted before: empty
    # there too, the compiler optimised it away everywhere and the target lost nothing.
    again: dict[str, Outcome] = {}
    if req.reference is not None:
        again = compile_for(nvcc, [j for j, o in zip(jobs, outcomes, strict=True) if o.empty],
                            {u.path: req.profile.compute(req.reference) for u in req.units},
                            req.workdir / "ptx-out")
    details: dict[str, Any] = {
        "compute": compute, "arch_variant": f"{req.profile.name}: {req.arch.name} builds as {compute}",
        "flags": jobs[0].flags, "flags_from": done.flags_from(), "flags_fallback": done.fallback(),
        "include_dirs": [str(d) for d in done.dirs], "nvcc": done.nvcc,
        "units": [{"path": u.path, "why": u.why, "builder": u.builder, "ok": o.ok,
                   "entries": len(o.entries), "empty": len(o.empty), "seconds": o.seconds,
                   "cached": o.cached, **({"flags": j.flags} if j.flags != jobs[0].flags else {}),
                   "kernels": sorted({ptx.demangle(e) for e in o.entries})}
                  for u, j, o in zip(req.units, jobs, outcomes, strict=True)],
        "entries": sum(len(o.entries) for o in outcomes),
        "compiled": sum(not o.cached for o in outcomes), "cached": sum(o.cached for o in outcomes),
        "sass": f"checked with {sass}" if sass else "not checked: no cuobjdump here",
    }
    if again and req.reference is not None:
        details["reference"] = {"arch": req.reference.name, "units": sorted(again)}
    return verdict(req, outcomes, details, again)


def verdict(req: PtxRequest, outcomes: list[Outcome], details: dict[str, Any],
            reference: dict[str, Outcome] | None = None) -> StageResult:
    """Findings for empty kernels and broken units; the stage's status and reason."""
    gates = {u.path for u in req.units if u.gate}
    return judge(req.arch, req.kernel_lines, req.waivers, outcomes, details, gates,
                 reference, req.reference, lambda names: hint(names, req.tree, req.profile),
                 launches(req, details))


def launches(req: PtxRequest, details: dict[str, Any]) -> list[Finding]:
    """The dynamic shared memory the units' host code asks for (their include closure
    read): an error where a constant passes the target's per-block limit, info where
    the source does not fix it (why, in ``details["dynamic_shared"]`` too)."""
    target = details["compute"].replace("compute_", "sm_")
    limit = shared_limit(target)
    resolver = IncludeResolver(req.tree, extra=req.tree_dirs)
    files = include_closure(req.tree, [u.path for u in req.units], resolver).files
    found = [site for path in sorted(files) for site in sites(path, req.tree.read_text(path) or "")]
    findings = []
    for site in found:
        if site.value is None:
            findings.append(Finding("shared-memory-undecided", INFO, site.path, site.line,
                                    f"kernel {site.kernel} asks for `{site.expression}` bytes "
                                    f"of dynamic shared memory, not decided statically: {site.why}"))
        elif limit is not None and site.value > limit:
            findings.append(Finding("ptx-over-shared-memory", ERROR, site.path, site.line,
                                    f"kernel {site.kernel} asks for {site.value} bytes of dynamic "
                                    f"shared memory (`{site.expression}`), over {target}'s "
                                    f"per-block limit of {limit}"))
    if found:
        details["dynamic_shared"] = [{"file": s.path, "line": s.line, "kernel": s.kernel,
                                      "expression": s.expression, "bytes": s.value,
                                      "limit": limit, "why": s.why} for s in found]
    return findings


def judge(arch: Arch, kernel_lines: dict[str, tuple[str, int]], waivers: list[Waiver],
          outcomes: list[Outcome], details: dict[str, Any], gates: set[str],
          reference: dict[str, Outcome] | None = None,
          reference_arch: Arch | None = None,
          cures: Callable[[list[str]], str] = cure,
          launched: list[Finding] | None = None) -> StageResult:
    """The verdict on compiled units, whoever compiled them (contrib, or a
    ``validation.compile`` command): a compile error in a unit of ``gates`` fails the
    stage, elsewhere it is info; ``details`` needs ``compute``, ``entries``, ``cached``.
    ``reference``: units compiled for ``reference_arch`` too; an entry empty there as
    well is info, not an error.  A unit nvcc lacks headers for holds the stage: one
    line names every header of every such unit, with ``cures``' word on where each
    comes from.  ``launched``: findings on the shared memory host code asks for."""
    findings = _empty_findings(arch, kernel_lines, outcomes, details["compute"],
                               reference or {}, reference_arch)
    lacking = _lack_findings(kernel_lines, outcomes, details)
    findings += lacking + (launched or [])
    for outcome in outcomes:
        if not outcome.ok and not outcome.missing_header and not outcome.refused:
            severity = ERROR if outcome.unit in gates else INFO
            findings.append(Finding("ptx-compile-error", severity, outcome.unit, 1,
                                    f"nvcc failed on {outcome.unit}: {outcome.first_error}"))
    findings = apply_waivers(findings, waivers)
    blocking = [f for f in findings if f.blocking]
    missing = [o for o in outcomes if not o.ok and o.missing_header]
    if blocking:
        return StageResult("ptx", FAILED, "; ".join(_short(f) for f in blocking[:3]) +
                           (f" (+{len(blocking) - 3} more)" if len(blocking) > 3 else ""),
                           findings, details=details)
    if missing:
        headers = list(dict.fromkeys(h for o in missing for h in o.lacking()))
        details["missing_headers"] = {o.unit: o.lacking() for o in missing}
        return StageResult("ptx", SKIPPED, f"nvcc cannot find {counted(len(headers), 'header')} "
                           f"({counted(len(missing), 'unit')} not compiled): install "
                           f"{cures(headers)}", findings, details=details)
    cached = f", {details['cached']} from the cache" if details["cached"] else ""
    return StageResult("ptx", PASSED, f"{counted(details['entries'], 'kernel entry')} in {counted(len(outcomes), 'unit')} "
                       f"for {details['compute']}, none empty{cached}", findings, details=details)


def _short(finding: Finding) -> str:
    return finding.message if finding.kind == "ptx-compile-error" else f"{finding.location}: {finding.message}"


def _lack_findings(kernel_lines: dict[str, tuple[str, int]], outcomes: list[Outcome],
                   details: dict[str, Any]) -> list[Finding]:
    """An error per kernel and figure the target lacks (an instruction ptxas refuses or
    the table says it lacks, shared memory over its per-block limit); each also in
    ``details["lacks"]`` as values."""
    findings, values = [], []
    for outcome in outcomes:
        seen = set()
        for lack in outcome.lacks(details["compute"]):
            name = ptx.demangle(lack.kernel) if lack.kernel else "(a kernel)"
            if (name, lack.kind, lack.instruction, lack.bytes) in seen:
                continue  # one per kernel, not per template instantiation
            seen.add((name, lack.kind, lack.instruction, lack.bytes))
            file, line = kernel_lines.get(name.rsplit("::", 1)[-1], (outcome.unit, 1))
            kind = ("ptx-lacks-instruction" if lack.kind is LackKind.INSTRUCTION
                    else "ptx-over-shared-memory")
            findings.append(Finding(kind, ERROR, file, line, f"kernel {name} ({outcome.unit}) "
                                    f"needs {lack.figure()}"))
            values.append({"unit": outcome.unit, "kernel": name, "kind": str(lack.kind),
                           "target": lack.target, "instruction": lack.instruction,
                           "bytes": lack.bytes, "limit": lack.limit, "read_from": lack.read_from})
    if values:
        details["lacks"] = values
    return findings


def _empty_findings(arch: Arch, kernel_lines: dict[str, tuple[str, int]],
                    outcomes: list[Outcome], compute: str, reference: dict[str, Outcome],
                    reference_arch: Arch | None) -> list[Finding]:
    findings = []
    for outcome in outcomes:
        # One finding per kernel, not per template instantiation (flashinfer has 480).
        totals = Counter(ptx.demangle(e) for e in outcome.entries)
        everywhere = {ptx.demangle(e) for e in empty_everywhere(outcome, reference.get(outcome.unit))}
        disabled = {ptx.demangle(e): text for e, text in outcome.disabled.items()}
        for name, empty in sorted(Counter(ptx.demangle(e) for e in outcome.empty).items()):
            file, line = kernel_lines.get(name.rsplit("::", 1)[-1], (outcome.unit, 1))
            if name in everywhere and reference_arch is not None:
                findings.append(Finding("empty-ptx-entry", INFO, file, line,
                                        f"kernel {name} is empty on {reference_arch.name} "
                                        f"too ({outcome.unit}): optimised away on every arch, "
                                        f"not lost on {arch.name}"))
                continue
            if name in disabled:
                findings.append(Finding("disabled-ptx-entry", ERROR, file, line,
                                        f"kernel {name} on {arch.name} reaches an arch-disabled "
                                        f"path: {empty} of {totals[name]} PTX entries for {compute} "
                                        f"({outcome.unit}) print “{disabled[name]}” where their "
                                        "MMA or tensor-memory work should be"))
                continue
            findings.append(Finding("empty-ptx-entry", ERROR, file, line,
                                    f"empty kernel {name} on {arch.name}: {empty} of {totals[name]} "
                                    f"PTX entries for {compute} ({outcome.unit}) store, copy or "
                                    "compute nothing (`ret;`, an error printf/trap, or reads "
                                    "alone)"))
        exits = Counter(ptx.demangle(e) for e in outcome.exit_only) - Counter(ptx.demangle(e) for e in outcome.empty)
        for name, count in sorted(exits.items()):
            file, line = kernel_lines.get(name.rsplit("::", 1)[-1], (outcome.unit, 1))
            real = compute.replace("compute_", "sm_")
            findings.append(Finding("exit-only-sass", ERROR, file, line,
                                    f"empty kernel {name} on {arch.name}: {counted(count, 'SASS function')} "
                                    f"for {real} ({outcome.unit}) are only EXIT"))
    return findings


def cuobjdump() -> str | None:
    """cuobjdump next to nvcc or on PATH (the SASS check runs only where it exists)."""
    nvcc = ptx.find_nvcc()
    beside = Path(nvcc).with_name("cuobjdump") if nvcc else None
    return str(beside) if beside and beside.exists() else shutil.which("cuobjdump")
