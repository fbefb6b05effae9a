"""What stands behind each excluding gate: its class and the evidence for it.

A JIT gate names the CUDA units its function builds.  The arch-guard analysis
walks those units and their ``#include`` closure once per arch: the target's
pass against the passes of the archs the gate admits.  An empty kernel or a
dropped statement on the target, device code using only ISA other archs have,
or a host check refusing the target (:mod:`contrib.analysis.hostarch`) makes
the gate ``needs-kernel-work`` (evidence: each finding's ``file:line`` and its
guard's); none makes it ``gate-only``.  A Python gate takes the class of what
its code reaches, by identity and at any depth (:mod:`contrib.audit.classing.behind`):
JIT modules, Triton and CuTe DSL kernels, ahead-of-time built ops; a gate in a
decision function, of what its callers run.  An upstream comment naming the
target's family as left out makes a gate ``intentional``, and every gate testing a
value that gate makes false (:func:`from_sources`); a gate admitting only the
architecture its own code is named for (``.../sm90/backend.py``) guards code
written for it; anything else is ``unknown``, with the reason.  What the refusal says (its ``raise``'s message)
joins the reason: it is upstream's word, but "not supported on SM120" is the
refusal itself, not a reason for it, so it never decides the class.
"""

from __future__ import annotations

import ast
import re
from dataclasses import replace

from contrib.analysis.hostarch import named_so, written_for
from contrib.analysis.includes import IncludeResolver, find_units
from contrib.analysis.pyparse import parse_python
from contrib.analysis.pywalk import single_assignment
from contrib.analysis.reach.names import CALLED, distinctive
from contrib.analysis.tree import SourceTree
from contrib.arch import Arch
from contrib.audit.classing.behind import Behind, Verdict, units_verdict
from contrib.audit.finding.gates import says_intentional
from contrib.audit.model import (
    GATE_ONLY,
    INTENTIONAL,
    JIT,
    NEEDS_KERNEL_WORK,
    UNKNOWN,
    AuditGate,
    Basis,
    Evidence,
    Step,
)
from contrib.ui import counted


def judge(tree: SourceTree, gates: list[AuditGate], arch: Arch,
          step: Step | None = None) -> list[AuditGate]:
    """The gates with ``class_``, ``evidence`` and ``reason`` set on every one that
    excludes ``arch`` (and no class on the others)."""
    resolver = IncludeResolver(tree)
    jit = sum(g.kind == JIT for g in gates)
    verdicts: dict[tuple[str, str], AuditGate] = {}
    read: list[AuditGate] = []
    done = 0
    for gate in gates:
        if gate.kind == JIT:
            if step is not None:
                step(done, jit, f"{gate.file}:{gate.line}")
            done += 1
            gate = _judge_jit(tree, resolver, gate, arch)
            verdicts.setdefault((gate.file, gate.function), gate)
        read.append(gate)
    behind = Behind(tree, resolver, arch, verdicts)
    classed = [_class_of(gate, behind, arch) for gate in read]
    return from_testers(tree, from_sources(tree, classed))


def _class_of(gate: AuditGate, behind: Behind, arch: Arch) -> AuditGate:
    """One gate's class: none when it admits the target; upstream's word, what its code
    reaches (a Python gate), or its units' reading (a JIT gate, read already)."""
    if not gate.excludes_target:
        return replace(gate, class_=None, basis=None)
    if says_intentional(gate.comment, arch):
        gate = gate.classed(INTENTIONAL, Basis.UPSTREAM_SAYS, f"upstream says: “{gate.comment}”")
    elif gate.kind != JIT:
        gate = _inherit(gate, behind)
    if gate.message and gate.class_ != INTENTIONAL:
        gate = replace(gate, reason=f"{gate.reason}; it refuses with “{gate.message}”")
    return gate


_MAX_TESTERS = 8  # gates named in a reason
_WORDS = re.compile(r"[A-Za-z_]\w*")


def from_sources(tree: SourceTree, gates: list[AuditGate]) -> list[AuditGate]:
    """A value the target's GPU makes false because upstream left the target out on
    purpose carries that intent to every gate testing it.  sglang's
    ``_compute_enable_deep_gemm()`` returns False on SM120 ("DeepGEMM requires
    TMEM/tcgen05 ..., not available on SM120": an ``intentional`` gate); the module
    sets ``ENABLE_JIT_DEEPGEMM`` from it and ``DEEPGEMM_SCALE_UE8M0`` from that, and
    dozens of gates elsewhere test those names.  Each such gate, excluding and
    ``unknown``, is ``intentional`` with the source named.  The names followed: the
    intentional gate's function (called), and names assigned, at a gate of the tree,
    from a followed one (module-level names by name when distinctive; a function's
    locals in that function only)."""
    seeds = [g for g in gates if g.excludes_target and g.class_ == INTENTIONAL]
    pending = [g for g in gates if g.excludes_target and g.class_ == UNKNOWN]
    if not seeds or not pending:
        return gates
    spans: dict[str, list[tuple[int, int, str]]] = {}

    def assigned(gate: AuditGate) -> str | None:
        """The name the statement holding ``gate`` assigns (``NAME = <gate's value>``)."""
        if gate.file not in spans:
            spans[gate.file] = _assignments(tree, gate.file)
        inside = [s for s in spans[gate.file] if s[0] <= gate.line <= s[1]]
        return max(inside)[2] if inside else None  # the innermost: it starts last

    def scope(gate: AuditGate, name: str) -> tuple[str, ...]:
        """Where ``name`` assigned at ``gate`` is seen: everywhere (a module's distinctive
        name), or in the gate's own function."""
        if gate.function == "<module>":
            return (name,) if distinctive(name) else ()
        return (gate.file, gate.function, name)

    sources: dict[tuple[str, ...], AuditGate] = {}  # a followed name -> the intentional gate
    for seed in seeds:
        name = assigned(seed) if seed.function == "<module>" else seed.name
        if name and distinctive(name):
            sources[(name,)] = seed
    values = [g for g in gates if g.class_ in (None, UNKNOWN)]
    changed = True
    while changed:
        changed = False
        for gate in values:
            source = _source_of(gate, sources)  # its text first: a file is parsed only then
            if source is None:
                continue
            name = assigned(gate)
            key = scope(gate, name) if name else ()
            if key and key not in sources:
                sources[key] = source
                changed = True
    waiting = {id(g) for g in pending}
    return [_intended(gate, _source_of(gate, sources)) if id(gate) in waiting else gate
            for gate in gates]


def _intended(gate: AuditGate, source: AuditGate | None) -> AuditGate:
    """``gate``, intentional because the value it tests comes from ``source``."""
    if source is None or source is gate:
        return gate
    return gate.classed(INTENTIONAL, Basis.INTENDED_VALUE, "the value it tests is false on the "
                        f"target because "
                        f"{source.file}:{source.line} {source.function} leaves it out on "
                        f"purpose: {source.reason}",
                        (Evidence(f"{source.file}:{source.line}", source.file,
                                  line=source.line),))


def _assignments(tree: SourceTree, path: str) -> list[tuple[int, int, str]]:
    """The lines of each value a module assigns to a plain name, with the name."""
    module = parse_python(path, tree.read_text(path) or "")
    if not isinstance(module, ast.Module):
        return []
    found = []
    for node in ast.walk(module):
        pair = single_assignment(node)
        if pair is None:
            continue
        target, value = pair
        if isinstance(target, ast.Name):
            found.append((value.lineno, value.end_lineno or value.lineno, target.id))
    return found


def _source_of(gate: AuditGate, sources: dict[tuple[str, ...], AuditGate]) -> AuditGate | None:
    for word in dict.fromkeys(_WORDS.findall(gate.text)):
        found = sources.get((word,)) or sources.get((gate.file, gate.function, word))
        if found is not None:
            return found
    return None


def from_testers(tree: SourceTree, gates: list[AuditGate]) -> list[AuditGate]:
    """A function returning an arch value (``def _mnnvl_supported(): return
    is_sm90_supported() and ...``) decides nothing itself: the gates whose tests call
    it do, in any file of the tree.  Such a gate, excluding and ``unknown``, takes the
    class of those gates (``needs-kernel-work`` when one has it), and chains of them
    (``_can_use()`` returning ``_available() and ...``) are followed until nothing
    changes.  Tested by no gate of a class, it takes the class of the returned arch
    values it is built on (:func:`_built_on`).  A name too common to be followed by
    name stays ``unknown``."""
    out = list(gates)
    pending = dict.fromkeys(n for n, g in enumerate(out) if g.excludes_target
                            and g.class_ == UNKNOWN and distinctive(g.name)
                            and g.returns_decision())
    if not pending:
        return out
    lines: dict[str, list[str]] = {}
    spans: dict[int, str] = {}  # each excluding gate's source lines, read once
    for n, g in enumerate(out):
        if g.excludes_target:
            if g.file not in lines:
                lines[g.file] = (tree.read_text(g.file) or "").splitlines()
            spans[n] = "\n".join(lines[g.file][g.line - 1:max(g.end_line, g.line)])
    called = {n: re.compile(rf"\b{re.escape(out[n].name)}\(") for n in pending}
    excluding = [n for n, g in enumerate(out) if g.excludes_target]
    changed = True
    while changed and pending:
        changed = False
        known = [n for n in excluding if out[n].class_ in (GATE_ONLY, NEEDS_KERNEL_WORK)]
        deciders = {out[n].name: out[n] for n in known
                    if distinctive(out[n].name) and out[n].returns_decision()}
        for n in list(pending):
            testers = [out[k] for k in known if k != n and called[n].search(spans[k])]
            found = (_tested_by(out[n], testers) if testers
                     else _built_on(out[n], spans[n], deciders))
            if found is not None:
                out[n] = found
                del pending[n]
                changed = True
    return out


def _tested_by(gate: AuditGate, testers: list[AuditGate]) -> AuditGate:
    """A returned arch value with the class of the gates testing it."""
    klass = (NEEDS_KERNEL_WORK if any(g.class_ == NEEDS_KERNEL_WORK for g in testers)
             else GATE_ONLY)
    named = ", ".join(f"{g.file}:{g.line} {g.function} ({g.class_})"
                      for g in testers[:_MAX_TESTERS])
    more = len(testers) - _MAX_TESTERS
    return gate.classed(klass, Basis.TESTED_BY, f"{gate.name}() returns an arch value and "
                        "decides nothing "
                        f"itself; the gates testing it do: {named}"
                        + (f" and {more} more" if more > 0 else ""),
                        tuple(dict.fromkeys(e for g in testers if g.class_ == klass
                                            for e in g.evidence)))


def _built_on(gate: AuditGate, span: str, deciders: dict[str, AuditGate]) -> AuditGate | None:
    """A returned arch value built on another function's (sglang's
    ``_post_attn_residual_is_read_only`` returns ``... and
    apply_flashinfer_allreduce_fusion(n)``), with no gate testing it: it excludes the
    target because that function does, and takes that gate's class (``needs-kernel-work``
    when one it calls has it).  None: it is built on none."""
    called = [deciders[n] for n in dict.fromkeys(CALLED.findall(span))
              if n in deciders and deciders[n] is not gate]
    if not called:
        return None
    klass = (NEEDS_KERNEL_WORK if any(g.class_ == NEEDS_KERNEL_WORK for g in called)
             else GATE_ONLY)
    named = ", ".join(f"{g.file}:{g.line} {g.name}() ({g.class_})" for g in called[:_MAX_TESTERS])
    return gate.classed(klass, Basis.BUILT_ON, f"{gate.name}() returns an arch value built on "
                        f"what {named} "
                        "returns, and no gate tests it: it excludes the target as that does",
                        tuple(dict.fromkeys(e for g in called if g.class_ == klass
                                            for e in g.evidence)))


def _named_for(gate: AuditGate, arch: Arch) -> Verdict | None:
    """A gate admitting only the majors its own code is named for (``_validate_sm90_arch``
    in ``moe_ep/backends/mega/kernel/sm90/...``), never the target's, guards code written
    for them: what stands behind it needs kernel work, though nothing behind it could
    be read (the same reading as a JIT module named so: :func:`units_verdict`).  Its
    own file and function named for no architecture, the functions its reading went
    through first (its callers, or what its code calls) speak: flashinfer's
    ``_blackwell_compile_options()`` admits SM10x for ``cp_delta_rule_*_dsl_sm100``."""
    if gate.reached:
        return None
    admits = set(gate.admits or ())
    own = written_for([*gate.file.split("/"), *gate.function.split(".")])
    tested = set(CALLED.findall(gate.text))  # what its test calls is what it tests, not guards
    first = [n for n in dict.fromkeys(c[0] for c in gate.calls if c) if n not in tested]
    written = own or written_for(first)
    if not written or arch.major in written or not admits or not admits <= set(written):
        return None
    archs, names = named_so(written)
    return Verdict(NEEDS_KERNEL_WORK, f"a Python condition admitting only what its code is "
                   f"named for: {archs} ({', '.join(names[:3])}), never {arch.name}",
                   [Evidence(gate.file, gate.file, says=f"named for {archs}")] if own else
                   [Evidence(name, says=f"named for {archs}") for name in names[:3]], basis=Basis.NAMED_FOR)


def _judge_jit(tree: SourceTree, resolver: IncludeResolver, gate: AuditGate,
               arch: Arch) -> AuditGate:
    """A JIT gate classed by the arch-guard analysis of the units it builds."""
    units = find_units(tree, list(gate.units))
    if not units:
        return replace(gate, units=()).classed(UNKNOWN, Basis.NO_UNIT,
                                              f"{gate.function} names no CUDA unit of the tree")
    verdict = units_verdict(tree, resolver, units, sorted(gate.admits or ()), arch,
                            [gate.function])
    return replace(gate, units=tuple(units)).classed(verdict.class_, verdict.basis,
                                                     verdict.reason, tuple(verdict.evidence))


def _inherit(gate: AuditGate, behind: Behind) -> AuditGate:
    """A Python gate with the class of what its code reaches (see
    :mod:`contrib.audit.classing.behind`)."""
    verdict = behind.of(gate.reached) or _named_for(gate, behind.arch)
    if verdict is not None:
        return replace(gate, units=tuple(verdict.units)).classed(
            verdict.class_, verdict.basis, verdict.reason, tuple(verdict.evidence))
    unread = behind.unread(gate.reached)
    if unread:
        return gate.classed(UNKNOWN, Basis.UNREAD, "a Python condition; what its code reaches "
                            "cannot be "
                            f"classed here: {unread}")
    return gate.classed(UNKNOWN, Basis.NOTHING_REACHED, "a Python condition; no JIT module, "
                        "Triton or CuTe kernel "
                        "or built op is reached by the code it guards "
                        f"({counted(len(gate.calls), 'call')} followed)")
