"""What stands behind each excluding gate: its class and the evidence for it.

A JIT gate names the CUDA units its function builds.  The arch-guard analysis
walks those units and their ``#include`` closure once per arch: the target's
pass against the passes of the archs the gate admits.  An empty kernel or a
dropped statement on the target, device code using only ISA other archs have,
or a host check refusing the target (:mod:`contrib.analysis.hostarch`) makes
the gate ``needs-kernel-work`` (evidence: each finding's ``file:line`` and its
guard's); none makes it ``gate-only``.  A Python gate takes the class of what
its code reaches, by identity and at any depth (:mod:`contrib.audit.behind`):
JIT modules, Triton and CuTe DSL kernels, ahead-of-time built ops; a gate in a
decision function, of what its callers run.  An upstream comment naming the
target's family as left out makes a gate ``intentional``; anything else is
``unknown``, with the reason.  What the refusal says (its ``raise``'s message)
joins the reason: it is upstream's word, but "not supported on SM120" is the
refusal itself, not a reason for it, so it never decides the class.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from contrib.analysis.includes import IncludeResolver, find_by_name
from contrib.analysis.tree import SourceTree
from contrib.arch import Arch
from contrib.audit.behind import Behind, units_verdict
from contrib.audit.find import says_intentional
from contrib.audit.model import INTENTIONAL, JIT, UNKNOWN, AuditGate, admitted_majors
from contrib.ui import counted

Step = Callable[[int, int, str], None]


def judge(tree: SourceTree, gates: list[AuditGate], arch: Arch, step: Step | None = None) -> None:
    """Set ``class_``, ``evidence`` and ``reason`` on every gate that excludes ``arch``."""
    resolver = IncludeResolver(tree)
    jit = [g for g in gates if g.kind == JIT]
    verdicts: dict[tuple[str, str], AuditGate] = {}
    for done, gate in enumerate(jit):
        if step is not None:
            step(done, len(jit), f"{gate.file}:{gate.line}")
        _judge_jit(tree, resolver, gate, arch)
        verdicts.setdefault((gate.file, gate.function), replace(gate))
    behind = Behind(tree, resolver, arch, verdicts)
    for gate in gates:
        if not gate.excludes_target:
            gate.class_ = None
            continue
        if says_intentional(gate.comment, arch):
            gate.class_, gate.reason = INTENTIONAL, f"upstream says: “{gate.comment}”"
        elif gate.kind != JIT:
            _inherit(gate, behind)
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
    verdict = units_verdict(tree, resolver, units, admitted_majors(gate.admits), arch)
    gate.class_, gate.evidence, gate.reason = verdict.class_, verdict.evidence, verdict.reason


def _inherit(gate: AuditGate, behind: Behind) -> None:
    """A Python gate takes the class of what its code reaches (see :mod:`contrib.audit.behind`)."""
    verdict = behind.of(gate.reached)
    if verdict is None:
        gate.class_ = UNKNOWN
        unread = behind.unread(gate.reached)
        if unread:
            gate.reason = f"a Python condition; what its code reaches cannot be classed here: {unread}"
            return
        gate.reason = ("a Python condition; no JIT module, Triton or CuTe kernel or built op "
                       f"is reached by the code it guards ({counted(len(gate.calls), 'call')} "
                       "followed)")  # fmt: skip
        return
    gate.class_, gate.evidence, gate.reason = verdict.class_, list(verdict.evidence), verdict.reason
    gate.units = list(verdict.units)
