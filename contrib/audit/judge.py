"""What stands behind each excluding gate: its class and the evidence for it.

A JIT gate names the CUDA units its function builds.  validate's arch-guard
analysis walks those units and their ``#include`` closure once per arch: the
target's pass against the passes of the archs the gate admits.  An empty
kernel or a dropped statement on the target makes the gate
``needs-kernel-work`` (evidence: each finding's ``file:line`` and its guard's);
none makes it ``gate-only``.  A Python gate whose gated code calls a JIT
module's getter (``get_x_module`` / ``gen_x_module``) inherits that module's
verdict, also one call down when the helper it calls is defined in the same
file (``_fused() -> get_x_module()``).  An upstream comment naming the target's
family as left out makes a gate ``intentional``; anything else is ``unknown``,
with the reason.  What the refusal says (its ``raise``'s message) joins the reason:
it is upstream's word, but "not supported on SM120" is the refusal itself, not a
reason for it, so it never decides the class.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from contrib.analysis.cuda_arch import analyze
from contrib.analysis.includes import IncludeResolver, find_by_name, include_closure
from contrib.analysis.tree import SourceTree
from contrib.arch import Arch, admitted_archs
from contrib.audit.find import says_intentional
from contrib.audit.model import (
    GATE_ONLY,
    INTENTIONAL,
    JIT,
    NEEDS_KERNEL_WORK,
    UNKNOWN,
    AuditGate,
    admitted_majors,
)
from contrib.record.finding import ERROR
from contrib.ui import counted

Step = Callable[[int, int, str], None]


def judge(tree: SourceTree, gates: list[AuditGate], arch: Arch, step: Step | None = None) -> None:
    """Set ``class_``, ``evidence`` and ``reason`` on every gate that excludes ``arch``."""
    resolver = IncludeResolver(tree)
    jit = [g for g in gates if g.kind == JIT]
    verdicts: dict[str, AuditGate] = {}
    for done, gate in enumerate(jit):
        if step is not None:
            step(done, len(jit), f"{gate.file}:{gate.line}")
        _judge_jit(tree, resolver, gate, arch)
        verdicts.setdefault(gate.function.rsplit(".", 1)[-1], replace(gate))
    for gate in gates:
        if not gate.excludes_target:
            gate.class_ = None
            continue
        if says_intentional(gate.comment, arch):
            gate.class_, gate.reason = INTENTIONAL, f"upstream says: “{gate.comment}”"
        elif gate.kind != JIT:
            _inherit(gate, verdicts)
        if gate.message and gate.class_ != INTENTIONAL:
            gate.reason += f"; it refuses with “{gate.message}”"


def _judge_jit(tree: SourceTree, resolver: IncludeResolver, gate: AuditGate, arch: Arch) -> None:
    """Classify a JIT gate by the arch-guard analysis of the units it builds."""
    units = [u for u in (find_by_name(tree, name) for name in gate.units) if u]
    gate.units = units
    if not units:
        gate.class_ = UNKNOWN
        gate.reason = f"{gate.function} names no CUDA unit of the tree"
        return
    majors = admitted_majors(gate.admits)
    closure = include_closure(tree, units, resolver)
    files = {path: tree.read_text(path) or "" for path in closure.files}
    analysis = analyze(files, units, arch, admitted_archs(majors), resolver)
    errors = [f for f in analysis.findings if f.severity == ERROR]
    if errors:
        gate.class_ = NEEDS_KERNEL_WORK
        gate.evidence = [_evidence(f.location, f.kind, f.guard, f.message) for f in errors]
        gate.reason = f"{counted(len(errors), 'kernel or statement', 'kernels or statements')} compiled out for {arch.name}"
    else:
        gate.class_ = GATE_ONLY
        gate.reason = (f"nothing in {counted(len(units), 'unit')} and {counted(len(closure.files), 'file')} "
                       f"is compiled out for {arch.name}")  # fmt: skip


def _evidence(location: str, kind: str, guard: str | None, message: str) -> str:
    return f"{location} {kind}" + (f" (guard {guard})" if guard else "") + f": {message}"


def _inherit(gate: AuditGate, verdicts: dict[str, AuditGate]) -> None:
    """A Python gate over code that loads a JIT module takes that module's verdict."""
    for name in gate.calls:  # direct calls first, then `helper>get_x_module` one level down
        via, _, last = name.rpartition(">")
        for candidate in (last, last.replace("get_", "gen_", 1)):
            jit = verdicts.get(candidate)
            if jit is not None and jit.class_ in (GATE_ONLY, NEEDS_KERNEL_WORK):
                gate.class_ = jit.class_
                gate.evidence = list(jit.evidence)
                gate.units = list(jit.units)
                through = f" through {via}()" if via else ""
                gate.reason = (f"its code loads {candidate}{through} ({jit.file}:{jit.line}): "
                               f"{jit.reason}")  # fmt: skip
                return
    triton = [name for name in gate.calls if name.rpartition(">")[2].startswith("triton:")]
    if triton:
        gate.class_ = GATE_ONLY
        kernel = triton[0].rpartition(">")[2].removeprefix("triton:")
        gate.reason = (f"its code runs the Triton kernel {kernel} ({triton[0]}); Triton "
                       "compiles for the GPU it runs on")  # fmt: skip
        return
    gate.class_ = UNKNOWN
    gate.reason = ("a Python condition; no JIT module or Triton kernel is reached by the "
                   f"code it guards ({counted(len(gate.calls), 'call')} followed)")
