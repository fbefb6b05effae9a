"""``contrib audit --compile``: the units behind each excluding gate, compiled to PTX.

The arch-guard analysis reads ``#if`` guards; this asks nvcc.  Every excluding
gate whose class came from CUDA units (``gate-only``, ``needs-kernel-work``,
and the Python gates that inherited one) has its units compiled for the
upstream's variant of the target through the path validate's PTX stage
takes (:func:`~contrib.analysis.ptxrun.compile_units`): the same flags (read
from the upstream's build code at the commit), the same arch variant, the
same header search (:func:`~contrib.analysis.ptxjobs.prepare_headers`:
the tree's ``include/`` folders, submodules the cache has, the headers an
installed upstream package ships to the upstream's interpreter), and the same
parallel, content-keyed cache (:mod:`contrib.analysis.ptx_cache`).  The units
are read from the cache's tree and written to a scratch folder under the
cache, never a checkout.

Then: a unit nvcc rejects makes its gates ``not-buildable`` (nvcc's first
error is the evidence); a unit with empty entries makes them
``needs-kernel-work`` (the entries are the evidence); otherwise a gate-only
gate stays so, with "compiled for ARCH: N entries, none empty".  The result
lives in the PTX cache only: the tree-keyed audit cache never holds it.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contrib import environ
from contrib.analysis import ptx
from contrib.analysis.headers import cure
from contrib.analysis.profiles import profile_for
from contrib.analysis.ptx import Outcome
from contrib.analysis.ptx_cache import compile_for, empty_everywhere
from contrib.analysis.ptxjobs import PtxRequest
from contrib.analysis.ptxneeds import Lack
from contrib.analysis.ptxrun import compile_units
from contrib.analysis.submodules import hint
from contrib.analysis.tree import SourceTree
from contrib.analysis.units import UNIT_SUFFIXES, Unit, gate_flags, gate_include_dirs
from contrib.arch import Arch, admitted_archs
from contrib.audit.model import (
    GATE_ONLY,
    JIT,
    NEEDS_KERNEL_WORK,
    NOT_BUILDABLE,
    UNKNOWN,
    AuditGate,
    Basis,
    Evidence,
    Step,
)
from contrib.errors import ContribError, UsageError
from contrib.ui import counted
from contrib.workspace.txn import check_inside

COMPILED = (GATE_ONLY, NEEDS_KERNEL_WORK)  # the classes a compile can confirm or change
_NAMES_SHOWN = 5
_SCRATCH = re.compile(r"\S*/ptx-tree/")  # nvcc names the materialised copy: say the tree path


@dataclass
class CompileSummary:
    """What ``--compile`` did for one upstream (the ``compile`` key of its JSON)."""

    arch: str
    compute: str = ""
    nvcc: str = ""
    units: int = 0
    compiled: int = 0  # nvcc ran
    cached: int = 0  # the PTX cache had it
    flags_from: str = ""
    missing_headers: tuple[str, ...] = ()  # headers this machine lacks (units not compiled)
    missing_hint: str = ""  # where they come from (a submodule, a package)

    def to_dict(self) -> dict[str, Any]:
        return {"arch": self.arch, "compute": self.compute, "nvcc": self.nvcc,
                "units": self.units, "compiled": self.compiled, "cached": self.cached,
                "flags_from": self.flags_from,
                "missing_headers": list(self.missing_headers),
                **({"missing_hint": self.missing_hint} if self.missing_hint else {})}


def find_compiler() -> str:
    """nvcc as validate finds it; UsageError (one line, exit 2) when there is none."""
    nvcc = ptx.find_nvcc()
    if nvcc is None:
        raise UsageError("--compile needs nvcc: not found on PATH or in "
                         f"{', '.join(ptx.NVCC_LOCATIONS)}; install the CUDA toolkit or "
                         "leave out --compile")
    return nvcc


def compile_gates(tree: SourceTree, gates: list[AuditGate], arch: Arch, *, nvcc: str,
                  python: str | None, step: Step | None = None
                  ) -> tuple[list[AuditGate], CompileSummary]:
    """Compile the units behind the excluding gates: the gates, those compiled with the
    class and evidence their PTX gives, and what nvcc did."""
    targets = [g for g in gates if g.excludes_target and g.units and g.class_ in COMPILED]
    profile = profile_for(tree)
    summary = CompileSummary(arch.name, profile.compute(arch))
    if not targets:
        return gates, summary
    jobs_of = _unit_flags(tree, targets)
    summary.units = len(jobs_of)
    if step is not None:
        step(0, len(jobs_of), f"units compiled for {summary.compute}")
    scratch = environ.cache_root() / "audit" / "compile"
    check_inside(environ.cache_root(), scratch)  # never compile into a symlink's target
    try:
        scratch.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ContribError(f"{scratch}: cannot make the compile scratch folder "
                           f"({exc.strerror or exc}); point CONTRIB_CACHE elsewhere") from None
    with tempfile.TemporaryDirectory(prefix="run-", dir=scratch) as tmp:
        units = [Unit(u, "built by an excluding gate", True) for u, _ in jobs_of]
        tree_dirs = gate_include_dirs(tree, [b for g in targets if g.kind == JIT
                                             for b in _build_functions(g)])
        request = PtxRequest(tree, arch, units, profile, python, [], [], [], Path(tmp), {},
                             progress=step, tree_dirs=tree_dirs)
        done = compile_units(request, nvcc, dict(jobs_of), [])
        jobs, outcomes = done.jobs, done.outcomes
        summary.nvcc, summary.flags_from = done.nvcc, done.flags_from()
        # A unit with no kernel entry for the target is compiled for an arch its gate
        # admits: entries there and none here mean its kernels are compiled out (a
        # CUTLASS_ARCH_MMA_SM100_SUPPORTED-style guard the #if analysis cannot follow).
        # So is one with empty entries: an entry empty for every arch (a kernel the
        # compiler optimised to nothing) is not the target's.
        hollow = {u for (u, _), o in zip(jobs_of, outcomes, strict=True)
                  if o.ok and (not o.entries or o.empty)}
        admitted = _admitted_arch(targets, hollow)
        again = compile_for(nvcc, jobs, {u: profile.compute(a) for u, a in admitted.items()},
                            Path(tmp) / "out")
    others = {unit: (admitted[unit], outcome) for unit, outcome in again.items()}
    summary.cached = sum(o.cached for o in outcomes)
    summary.compiled = len(outcomes) - summary.cached
    summary.missing_headers = tuple(dict.fromkeys(h for o in outcomes for h in o.lacking()))
    summary.missing_hint = hint(summary.missing_headers, tree, profile) if summary.missing_headers else ""
    by_unit: dict[str, Outcome] = {}
    for (unit, _), outcome in zip(jobs_of, outcomes, strict=True):
        by_unit.setdefault(unit, outcome)
    compiled = {id(gate): _apply(gate, [by_unit[u] for u in gate.units if u in by_unit], arch,
                                 summary.compute, others,
                                 lambda names: hint(names, tree, profile)) for gate in targets}
    return [compiled.get(id(gate), gate) for gate in gates], summary


def _admitted_arch(gates: list[AuditGate], units: set[str]) -> dict[str, Arch]:
    """For each unit of ``units``, the lowest arch the first gate building it admits."""
    found: dict[str, Arch] = {}
    for gate in gates:
        archs = admitted_archs(sorted(gate.admits or ()))
        for unit in gate.units:
            if archs and unit in units and unit not in found:
                found[unit] = archs[0]
    return found


def _unit_flags(tree: SourceTree, gates: list[AuditGate]) -> list[tuple[str, tuple[str, ...]]]:
    """(unit, its own flags) to compile: a JIT gate's (``-DX`` its function passes, joining
    what the upstream's build passes every unit); a Python gate's units compile as their
    JIT gate builds them."""
    found: dict[str, tuple[str, ...]] = {}
    for gate in sorted(gates, key=lambda g: g.kind != JIT):
        flags = tuple(gate_flags(tree, _build_functions(gate)) if gate.kind == JIT else [])
        for unit in gate.units:
            if unit.endswith(UNIT_SUFFIXES):  # a .cpp unit is host code: no PTX to ask for
                found.setdefault(unit, flags)
    return sorted(found.items())


def _build_functions(gate: AuditGate) -> list[tuple[str, str]]:
    """(file, function) of a JIT gate's function and the ones it builds through."""
    return [(gate.file, name) for name in [gate.function, *gate.builders]]


def _apply(gate: AuditGate, outcomes: list[Outcome], arch: Arch, compute: str,
           others: dict[str, tuple[Arch, Outcome]] | None = None,
           cures: Callable[[list[str]], str] = cure) -> AuditGate:
    """The gate with the class and evidence its units' PTX gives (``others``: a unit with
    no entry for ``arch``, compiled for an admitted arch).

    A unit nvcc could not compile for lack of a header (curand, nvshmem, CUTLASS, a
    header downloaded at JIT time) says nothing about the arch.  A finding the other
    units give stands; but ``gate-only`` would then stand on the ``#if`` guards alone
    for the units nvcc never saw (flashinfer's ``gen_mla_module``: SM100 MLA kernels
    whose arch-specific code lives in the CUTLASS headers the guard reading lacks), so
    such a gate is ``unknown`` until the header is installed and it is compiled."""
    unbuilt = [o for o in outcomes if not o.ok and o.missing_header]
    gate = _apply_compiled(gate, [o for o in outcomes if o not in unbuilt], arch, compute,
                           others)
    if not unbuilt:
        return gate
    evidence = (*gate.evidence, *(_said(o.unit, "not compiled here: nvcc cannot find "
                                          + ", ".join(f"`{h}`" for h in o.lacking()))
                                  for o in unbuilt))
    lacking = (f"{counted(len(unbuilt), 'unit')} not compiled for lack of "
               f"{cures(list(dict.fromkeys(h for o in unbuilt for h in o.lacking())))}")
    if gate.class_ == GATE_ONLY:
        return gate.classed(UNKNOWN, Basis.HEADER_MISSING, f"{lacking}: gate-only would stand "
                            "on the #if guards "
                            f"alone, which cannot see into what nvcc did not compile "
                            f"({gate.reason})", evidence)
    return gate.classed(gate.class_, gate.basis, ((gate.reason + "; ") if gate.reason else "")
                        + f"{lacking}: its class stands on the findings without them", evidence)


def _said(unit: str, says: str) -> Evidence:
    """What compiling ``unit`` showed."""
    return Evidence(unit, unit, says=says)


def _apply_compiled(gate: AuditGate, outcomes: list[Outcome], arch: Arch, compute: str,
                    others: dict[str, tuple[Arch, Outcome]] | None) -> AuditGate:
    """The gate with the class and evidence of the PTX of the units nvcc compiled or
    refused."""
    lacking = [(o, o.lacks(compute)) for o in outcomes if o.refused or o.ok]
    lacking = [(o, found) for o, found in lacking if found]
    failed = [o for o in outcomes if not o.ok and not o.refused]
    if failed:
        errors = tuple(_said(o.unit, f"nvcc ({compute}): {_SCRATCH.sub('', o.first_error)}")
                       for o in failed)
        return gate.classed(NOT_BUILDABLE, Basis.NOT_COMPILED,
                            f"{len(failed)} of {counted(len(outcomes), 'unit')} "
                            f"do not compile for {arch.name} ({compute})",
                            errors + gate.evidence)
    if lacking:
        return _lacks(gate, lacking, arch)
    lost = [(o, *others[o.unit]) for o in outcomes
            if o.ok and not o.entries and others and o.unit in others
            and others[o.unit][1].ok and others[o.unit][1].entries]
    if lost:
        return gate.classed(NEEDS_KERNEL_WORK, Basis.NO_ENTRY,
                            f"{counted(len(lost), 'unit')} compile kernels "
                            f"for {lost[0][1].name} and none for {arch.name}", (
            *gate.evidence, *(_said(o.unit, f"no kernel entry for {arch.name}, "
                                    f"{_entries(len(twin.entries))} for {other.name} "
                                    f"({_names(twin.entries)}): its kernels are compiled out "
                                    f"for {arch.name}") for o, other, twin in lost)))
    reference = {unit: twin for unit, (_, twin) in (others or {}).items()}
    everywhere = {o.unit: empty_everywhere(o, reference.get(o.unit)) for o in outcomes if o.empty}
    empty = [o for o in outcomes if o.empty and len(everywhere[o.unit]) < len(o.empty)]
    evidence = [*gate.evidence, *(_said(unit, f"{_names(names)} empty for {others[unit][0].name} "
                                             "too (compiled away for every arch; not counted)")
                                  for unit, names in everywhere.items() if names and others)]
    if empty:
        counts = {o.unit: [e for e in o.empty if e not in everywhere[o.unit]] for o in empty}
        for o in empty:
            evidence += _emptied(o, counts[o.unit], compute)
        return gate.classed(NEEDS_KERNEL_WORK, Basis.EMPTY_ENTRIES,
                            f"{counted(sum(map(len, counts.values())), 'PTX entry')} "
                            f"compiled for {arch.name} do not do their work (empty, or stopped "
                            "at an arch-disabled MMA)", tuple(evidence))
    if not outcomes:  # only host (.cpp) units behind it: nothing for nvcc to confirm
        return gate.classed(gate.class_, gate.basis, gate.reason, tuple(evidence))
    total = sum(len(o.entries) for o in outcomes)
    evidence += [_said(o.unit, f"compiled for {arch.name}: {_entries(len(o.entries))}, none "
                               f"empty{f' for {arch.name} alone' if o.empty else ''} "
                               f"({_names(o.entries)})") if o.entries else
                 _said(o.unit, f"compiled for {arch.name}: no kernel entry in it"
                               + _nor(others, o.unit)) for o in outcomes]
    if gate.class_ != GATE_ONLY or not total:  # with no entry nvcc neither confirms nor refutes
        return gate.classed(gate.class_, gate.basis, gate.reason, tuple(evidence))
    return gate.classed(gate.class_, Basis.COMPILED, f"compiled for {arch.name}: "
                        f"{_entries(total)}, none empty ({counted(len(outcomes), 'unit')}, "
                        f"{compute})", tuple(evidence))


def _lacks(gate: AuditGate, lacking: list[tuple[Outcome, list[Lack]]], arch: Arch) -> AuditGate:
    """``needs-kernel-work``: kernels of the units need what ``arch`` lacks (an
    instruction, shared memory over its per-block limit), each kernel and figure once."""
    evidence = list(gate.evidence)
    kernels = set()
    for outcome, found in lacking:
        said = dict.fromkeys(f"kernel {ptx.demangle(lack.kernel) or '(unnamed)'} needs "
                             f"{lack.figure()}" for lack in found)
        kernels |= {ptx.demangle(lack.kernel) for lack in found}
        evidence += [_said(outcome.unit, text) for text in said]
    return gate.classed(NEEDS_KERNEL_WORK, Basis.TARGET_LACKS,
                        f"{counted(len(kernels), 'kernel')} compiled for {arch.name} need what "
                        "it lacks (an instruction, or shared memory over its per-block limit)",
                        tuple(evidence))


def _emptied(outcome: Outcome, undone: list[str], compute: str) -> list[Evidence]:
    """What a unit's PTX entries empty for the target show: those stopped at an
    arch-disabled MMA, and those plainly empty."""
    found = []
    stopped = [e for e in undone if e in outcome.disabled]
    if stopped:
        found.append(_said(outcome.unit, f"{len(stopped)} of {len(outcome.entries)} PTX entries "
                           f"for {compute} reach “{outcome.disabled[stopped[0]]}” where their "
                           f"MMA or tensor-memory work should be: {_names(stopped)}"))
    plain = [e for e in undone if e not in outcome.disabled]
    if plain:
        found.append(_said(outcome.unit, f"{len(plain)} of {len(outcome.entries)} PTX entries "
                           f"for {compute} are empty: {_names(plain)}"))
    return found


def _nor(others: dict[str, tuple[Arch, Outcome]] | None, unit: str) -> str:
    """For a unit with no entry: what the admitted arch's compile said."""
    if not others or unit not in others:
        return ""
    other, twin = others[unit]
    if twin.ok:  # no entry there either: instantiated elsewhere (files the build generates)
        return f", nor for {other.name} (its kernels are instantiated elsewhere)"
    return f"; for {other.name} it does not compile either"


def _entries(count: int) -> str:
    return f"{count} entr{'y' if count == 1 else 'ies'}"


def _names(mangled: list[str]) -> str:
    names = sorted({ptx.demangle(e) for e in mangled})
    more = len(names) - _NAMES_SHOWN
    return ", ".join(names[:_NAMES_SHOWN]) + (f" and {more} more" if more > 0 else "")
