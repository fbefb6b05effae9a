"""The class of what a Python gate's code reaches, by identity, at any depth.

:mod:`contrib.analysis.reach` hands each gate the targets its code reaches
(``jit``, ``triton``, ``cute``, ``aot``: tree path and qualified name, or the
op's name).  Each is judged once per tree:

* a JIT function holding a ``supported_major_versions`` gate takes that gate's
  verdict; a module builder without one is judged by its units against the
  majors its literal nvcc flags name (``sm100a_nvcc_flags``), and one whose flags
  name none builds for the GPU it runs on (it admits the target);
* a CuTe DSL class whose ``admissible_archs`` omit the target's major has no
  kernel for it: ``needs-kernel-work``;
* an ahead-of-time op (``torch.ops.sgl_kernel.X``) is found by its registration in
  the tree's C++ and judged by its unit, as a JIT module's;
* a Triton kernel compiles for the GPU it runs on: ``gate-only``;
* prebuilt cubins a tree function fetches (flashinfer's trtllm-gen GEMM and FMHA
  kernels, DeepGEMM's) are built nowhere here: lifting the gate is not all it takes
  unless their arch list names the target.  Read and lacking it
  (``needs-kernel-work``: kernels for it must be built and published upstream), or
  not read (the gate is ``unknown``: "runs prebuilt cubins ... whose arch list is not
  read here"); an op built ahead of time by another package (a definition outside
  the tree) is unread the same way;
* a vendor library's call (cuDNN, ``triton_kernels``) stays ``gate-only``, on purpose:
  such a library ships kernels for every architecture of its release (or compiles
  them for the GPU it runs on), so a release that knows the target serves it, and
  which release is installed is the user's choice, not the upstream's code.

Which one speaks for the gate: what the target is kept from.  A module that
omits the target (its gate, its flags, its admissible archs) is at stake; among
those the worst class wins (``needs-kernel-work`` over ``gate-only``: behind one
dispatch an sm90 and an sm100 module, lifting the gate lets the target into
both, and the one that needs kernels decides what the lift costs).  Only when
nothing reached omits the target do the modules that build for it, Triton
kernels and ops speak: lifting the gate lets the target run code that already
serves it, ``gate-only``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from contrib.analysis import aotops
from contrib.analysis.cuda_arch import analyze
from contrib.analysis.hostarch import (
    HOST_REFUSAL,
    arch_findings,
    host_checks,
    named_so,
    written_for,
)
from contrib.analysis.includes import INCLUDE, IncludeResolver, find_units, include_closure
from contrib.analysis.jitsources import built_sources, module_strings
from contrib.analysis.pyparse import PARSE_ERRORS, parse
from contrib.analysis.pywalk import callee_name
from contrib.analysis.reach.endpoints import (
    ARCH_LIBRARIES,
    VENDOR_LIBRARIES,
    Endpoint,
    EndpointKind,
)
from contrib.analysis.tree import SourceTree
from contrib.arch import Arch, admitted_archs, all_majors
from contrib.audit.model import (
    GATE_ONLY,
    NEEDS_KERNEL_WORK,
    AuditGate,
    Basis,
    Evidence,
    GateClass,
    Place,
    admits_text,
)
from contrib.record.finding import ERROR, Finding
from contrib.ui import counted


@dataclass
class Verdict:
    """A class, its evidence and reason, the units judged, and whether the target is
    kept from it (``at_stake``)."""

    class_: GateClass
    reason: str
    evidence: list[Evidence] = field(default_factory=list)
    units: list[str] = field(default_factory=list)
    at_stake: bool = True
    refused: Finding | None = None  # a C/C++ host check raising on the target: a crash there
    basis: Basis = field(kw_only=True)  # what the class stands on


def units_verdict(tree: SourceTree, resolver: IncludeResolver, units: list[str],
                  majors: Iterable[int], arch: Arch, named: Iterable[str] = ()) -> Verdict:
    """The class of building ``units`` for ``arch`` where ``majors`` were admitted: the
    guard analysis (kernels or statements compiled out), then the C/C++ reading of
    :mod:`contrib.analysis.hostarch` (ISA the target lacks, a host check refusing it).

    Where nothing is compiled out but the module is built only for other majors and
    its builder (``named``) or its units are named for another architecture
    (``gen_cutlass_fused_moe_sm100_module``, ``selective_state_update_sm90.cu``) and
    never for the target's, its kernels were written for that architecture: no guard
    hides them, yet nothing in them is the target's, so it needs kernel work (what
    flashinfer's own openings of such modules to SM12x added)."""
    closure = include_closure(tree, units, resolver)
    files = {path: tree.read_text(path) or "" for path in closure.files}
    majors = sorted(set(majors))
    analysis = analyze(files, units, arch, admitted_archs(majors), resolver)
    errors = [f for f in analysis.findings if f.severity == ERROR]
    errors += arch_findings(files, analysis.passes.get(arch.name), arch, majors)
    if errors:
        evidence = [_evidence(f) for f in errors]
        return Verdict(NEEDS_KERNEL_WORK, f"{counted(len(errors), 'kernel or statement', 'kernels or statements')} "
                       f"compiled out or refused for {arch.name}", evidence, units,
                       refused=next((f for f in errors if f.kind == HOST_REFUSAL), None), basis=Basis.COMPILED_OUT)
    nothing = (f"nothing in {counted(len(units), 'unit')} and "
               f"{counted(len(closure.files), 'file')} is compiled out for {arch.name}")
    written = written_for([*named, *units]) if majors and arch.major not in majors else {}
    if written and arch.major not in written:
        archs, names = named_so(written)
        return Verdict(NEEDS_KERNEL_WORK, f"{nothing}, but its code is written for {archs} "
                       f"(named so: {', '.join(names[:4])}) and nothing in it for {arch.name}",
                       [Evidence(n, says=f"named for {archs}") for n in names[:10]], units, basis=Basis.WRITTEN_FOR)
    return Verdict(GATE_ONLY, nothing + _unseen(closure.unresolved), [], units, basis=Basis.UNITS_READ)


def _unseen(unresolved: list[tuple[str, str]]) -> str:
    """What a gate-only reading could not see: the quoted includes of the closure that
    are not in the tree (CUTLASS, a header fetched at build time).  Their code may be
    what the target lacks; the class then stands on the ``#if`` guards of the tree's
    own files, until ``contrib audit --compile`` compiles the units."""
    names = list(dict.fromkeys(name for _, name in unresolved))
    if not names:
        return ""
    shown = ", ".join(names[:2]) + (f" and {len(names) - 2} more" if len(names) > 2 else "")
    return (f"; it stands on the #if guards alone, unread: {counted(len(names), 'include')} "
            f"not in the tree ({shown}); contrib audit --compile compiles through them")


_Key = tuple[EndpointKind, str, str, tuple[int, ...], tuple[str, ...]]


def _key(target: Endpoint) -> _Key:
    """An endpoint's verdict is its own and its builders' (not the rest of the chain)."""
    return (target.kind, target.path, target.name, target.majors, tuple(_builders(target)))


def _builders(target: Endpoint) -> list[str]:
    """The JIT builders on the way to ``target`` and itself (``gen_x_sm100_module`` passing
    its flags to ``gen_x_module``): the names its code is known by."""
    return list(dict.fromkeys(n for n in (*target.chain, target.name)
                              if n.startswith("gen_")))


def _evidence(finding: Finding) -> Evidence:
    """A finding of the guard or C/C++ reading as the evidence of a class."""
    return Evidence(finding.location, finding.file, finding.kind, finding.message,
                    None if finding.guard_at is None else Place(*finding.guard_at),
                    line=finding.line)


_RANK = {NEEDS_KERNEL_WORK: 0, GATE_ONLY: 1}
_GEN_DEF = re.compile(r"^\s*def (gen_\w+)\(", re.MULTILINE)


class Behind:
    """Verdicts of the targets of one tree, each computed once."""

    def __init__(self, tree: SourceTree, resolver: IncludeResolver, arch: Arch,
                 gates: dict[tuple[str, str], AuditGate]) -> None:
        self.tree, self.resolver, self.arch, self.gates = tree, resolver, arch, gates
        self._done: dict[_Key, Verdict | None] = {}
        self._unread: dict[_Key, str] = {}  # an endpoint judged None: why
        self._functions: dict[str, tuple[dict[str, ast.AST], dict[str, list[str]]]] = {}
        self._builders: dict[str, list[str]] | None = None  # gen_* name -> files
        self._ops: aotops.OpIndex | None = None

    def of(self, reached: Iterable[Endpoint]) -> Verdict | None:
        """The verdict that speaks for a gate whose code reaches ``reached``."""
        best: tuple[int, int, int, Verdict] | None = None
        targets = list(reached)
        # A dispatch table (``modules[backend]()``, ``name[]`` in the chain) with an entry
        # built for the target serves it: its other entries are other GPUs' paths.
        served = {_table_of(t.chain) for t in targets if _table_of(t.chain) and self._serves(t)}
        unread = False
        for order, target in enumerate(targets):
            if _table_of(target.chain) in served and not self._serves(target):
                continue
            key = _key(target)
            if key not in self._done:
                self._done[key] = self._judge(target)
                if self._done[key] is None:
                    self._unread[key] = self._why_unread(target)
            verdict = self._done[key]
            unread = unread or verdict is None
            if verdict is None or verdict.class_ not in _RANK:
                continue
            rank = (0 if verdict.at_stake else 1, _RANK[verdict.class_], order)
            if best is None or rank < best[:3]:
                best = (*rank, _via(verdict, target))
        if best is not None and best[3].class_ == GATE_ONLY and unread:
            return None  # gate-only says nothing needs kernel work; what is unread may
        return best[3] if best else None

    def unread(self, reached: Iterable[Endpoint]) -> str:
        """Why the targets ``reached`` class nothing (after :meth:`of` found no verdict):
        the first few, each with its reason; "" when nothing was reached."""
        keys = (_key(t) for t in reached)
        why = [self._unread[key] for key in dict.fromkeys(keys) if key in self._unread]
        shown = "; ".join(dict.fromkeys(why))
        return shown if len(why) <= 3 else f"{shown} (and {len(why) - 3} more)"

    def _serves(self, target: Endpoint) -> bool:
        """A JIT builder built for the target: its flags name its major, or its gate admits it."""
        if target.kind != EndpointKind.JIT:
            return False
        gate = self.gates.get((target.path, target.name))
        if gate is not None:
            return not gate.excludes_target and gate.class_ != NEEDS_KERNEL_WORK
        return self.arch.major in target.majors

    def _why_unread(self, target: Endpoint) -> str:
        where = f"{target.name} ({target.path})" if target.path else target.name
        if target.kind == EndpointKind.JIT:
            gate = self.gates.get((target.path, target.name))
            if gate is not None:
                return f"the JIT module {where}, whose own class is {gate.class_ or 'not read'}"
            return f"the JIT builder {where}, which names no CUDA unit of the tree"
        if target.kind == EndpointKind.CUBIN:
            return f"it runs prebuilt cubins fetched by {where}, whose arch list is not read here"
        if target.kind == EndpointKind.AOT:
            if self._ops is None:
                self._ops = aotops.OpIndex(self.tree)
            registered = self._ops.registered(target.name)
            if registered is None:
                return f"the built op {target.name}, registered nowhere in the tree's C++"
            return (f"the built op {target.name}, registered as {registered}, whose definition "
                    "is not in the tree (a dependency fetched at build time)")
        if target.kind == EndpointKind.CUTILE:
            archs = ", ".join(f"{m}.x" for m in target.majors)
            return (f"the cuTile kernel {where}: cuTile compiles for compute capability "
                    f"{archs}, not {self.arch.name}")
        return f"{target.kind} {where}"

    def _judge(self, target: Endpoint) -> Verdict | None:
        if target.kind == EndpointKind.JIT:
            return self._jit(target)
        if target.kind == EndpointKind.TRITON:
            return Verdict(GATE_ONLY, f"its code runs the Triton kernel {target.name} "
                           f"({target.path}); Triton compiles for the GPU it runs on",
                           at_stake=False, basis=Basis.TRITON)
        if target.kind == EndpointKind.CUTILE:
            if self.arch.major not in target.majors:
                return None  # unread: the toolkit's list, not the tree's code, leaves it out
            return Verdict(GATE_ONLY, f"its code runs the cuTile kernel {target.name} "
                           f"({target.path}); cuTile compiles Tile IR for the GPU it runs on",
                           at_stake=False, basis=Basis.CUTILE)
        if target.kind == EndpointKind.CUTE:
            return self._cute(target)
        if target.kind == EndpointKind.AOT:
            return self._aot(target)
        if target.kind == EndpointKind.CUBIN:
            return self._cubin(target)
        if target.kind == EndpointKind.CHECKS:
            return Verdict(GATE_ONLY, "what it guards only checks (asserts, raises, log lines): "
                           "it runs no kernel, so admitting the target changes gate lines only",
                           at_stake=False, basis=Basis.CHECKS_ONLY)
        if target.kind == EndpointKind.LIB and target.majors:
            library = ARCH_LIBRARIES[target.name.split(".")[0]][0]
            archs = ", ".join(f"sm_{m}x" for m in target.majors)
            if self.arch.major in target.majors:
                return Verdict(GATE_ONLY, f"its code calls {target.name} of {library}, whose "
                               f"kernels are built for {archs}", at_stake=False, basis=Basis.LIBRARY)
            return Verdict(NEEDS_KERNEL_WORK, f"its code calls {target.name} of {library}, "
                           f"whose kernels are built for {archs} only (as the library says): "
                           f"kernels for {self.arch.name} must come from that library",
                           [Evidence(target.name, says=f"{library}, {archs} only")], basis=Basis.LIBRARY)
        if target.kind == EndpointKind.LIB:
            library = VENDOR_LIBRARIES.get(target.name.split(".")[0], target.name)
            return Verdict(GATE_ONLY, f"its code calls {target.name} of {library}, which brings "
                           "kernels of its own for the architectures of its release: no kernel "
                           "of the tree does that work", at_stake=False, basis=Basis.LIBRARY)
        return None

    def _jit(self, target: Endpoint) -> Verdict | None:
        gate = self.gates.get((target.path, target.name))
        where = f"{target.name} ({target.path})"
        if gate is not None and not gate.excludes_target:
            if gate.class_ == NEEDS_KERNEL_WORK or gate.evidence:
                # admitted into units with nothing for it: its kernels are compiled out
                # (the evidence an admitting gate carries), the target is kept from them
                return Verdict(NEEDS_KERNEL_WORK, f"its code loads {where}, whose gate at line "
                               f"{gate.line} admits {self.arch.name}, but {gate.reason}",
                               list(gate.evidence), list(gate.units), basis=gate.basis or Basis.ADMITTED)
            return Verdict(GATE_ONLY, f"its code loads {where}, whose gate at line {gate.line} "
                           f"admits {self.arch.name}", at_stake=False, basis=Basis.ADMITTED)
        if gate is not None:
            if gate.class_ not in _RANK:
                return None
            return Verdict(gate.class_, f"its code loads {target.name} ({target.path}:"
                           f"{gate.line}), whose gate admits {admits_text(gate.admits)}: "
                           f"{gate.reason}",
                           list(gate.evidence),
                           list(gate.units), gate.excludes_target, basis=gate.basis or Basis.UNREAD)
        units = self._units(target)
        if not units:
            return None
        omits = bool(target.majors) and self.arch.major not in target.majors
        majors = target.majors if omits else ()
        verdict = units_verdict(self.tree, self.resolver, units, majors, self.arch,
                                _builders(target))
        built = (f"built for majors {', '.join(map(str, target.majors))} by its nvcc flags"
                 if omits else f"built for {self.arch.name} by its nvcc flags" if target.majors
                 else "built for the GPU it runs on")
        verdict.reason = f"its code loads {where}, {built}: {verdict.reason}"
        verdict.at_stake = omits
        return verdict

    def _units(self, target: Endpoint) -> list[str]:
        read = self._functions.get(target.path)
        if read is None:
            read = self._functions[target.path] = _functions(self.tree, target.path)
        functions, strings = read
        return (find_units(self.tree, built_sources(functions, target.name, self.arch.major, strings))
                or self._templated(target, functions, strings))

    def _templated(self, target: Endpoint, functions: dict[str, ast.AST],
                   strings: dict[str, list[str]]) -> list[str]:
        """A builder that writes its unit from a C++ template held in a Python string
        (flashinfer's ``gen_act_and_mul_module`` renders ``activation_templ`` into
        ``{name}_and_mul.cu``): the files of the tree that template includes
        (``<flashinfer/activation.cuh>``), where its kernels are.  The template is one
        the builder reads by name, or a function of its module it calls does."""
        node = functions.get(target.name)
        if node is None:
            return []
        named = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        for callee in [functions[n] for n in list(named) if n in functions]:
            named |= {n.id for n in ast.walk(callee) if isinstance(n, ast.Name)}
        found: list[str] = []
        for name in sorted(named & set(strings)):  # a module string that includes: C++
            for include in (i for text in strings[name] for i in INCLUDE.findall(text)):
                path = self.resolver(target.path, include)
                if path is not None and path not in found:
                    found.append(path)
        return found

    def _cute(self, target: Endpoint) -> Verdict:
        archs = ", ".join(f"sm_{m}x" for m in target.majors)
        where = f"the CuTe DSL kernel {target.name} ({target.path})"
        if not target.majors or self.arch.major in target.majors:
            serves = f"admits {self.arch.name}" if target.majors else "is generic"
            return Verdict(GATE_ONLY, f"its code runs {where}, which {serves}; CuTe DSL "
                           "compiles for the GPU it runs on", at_stake=False, basis=Basis.CUTE)
        return Verdict(NEEDS_KERNEL_WORK, f"its code runs {where}, whose archs ({archs}: its "
                       f"admissible_archs, or the arch-specific CuTe ops its module uses) omit "
                       f"{self.arch.name}", [Evidence(f"{target.path} {target.name}", says=f"{archs} only")], basis=Basis.CUTE)

    def _cubin(self, target: Endpoint) -> Verdict | None:
        """Prebuilt cubins: needs kernel work when the majors read for them omit the
        target, or when the launcher their loader builds here refuses it in a C++ host
        check (trtllm-gen's ``TllmGenFmhaRunner``: ``FLASHINFER_CHECK(mSM == kSM_100 ||
        mSM == kSM_103, "Unsupported architecture")``); gate-only (nothing at stake) when
        they name it; None (unread) else."""
        if not target.majors:
            return self._launcher(target)
        archs = ", ".join(f"sm_{m}x" for m in target.majors)
        where = f"prebuilt cubins fetched by {target.name} ({target.path})"
        if self.arch.major in target.majors:
            return Verdict(GATE_ONLY, f"its code runs {where}, made for {archs}",
                           at_stake=False, basis=Basis.CUBIN)
        return Verdict(NEEDS_KERNEL_WORK, f"its code runs {where}, made for {archs} (the archs "
                       "their names carry, what their loader calls or returns named for "
                       "archs, or the nvcc flags of the runner built to launch "
                       f"them), none for {self.arch.name}: no source here builds them, and "
                       "kernels for it must be built and published upstream",
                       [Evidence(f"{target.path} {target.name}",
                                 says=f"prebuilt cubins for {archs} only")], basis=Basis.CUBIN)

    def _launcher(self, target: Endpoint) -> Verdict | None:
        """Cubins whose arch list is not read: the host checks of the units their loader
        builds to launch them (itself, or the ``gen_*`` builders it calls: flashinfer's
        ``get_trtllm_gen_fmha_module`` calls ``gen_trtllm_gen_fmha_module`` of another
        file), and of what those include."""
        units = self._units(target) or [
            unit for name in self._called_builders(target)
            for path in self._builder_files().get(name, ())
            for unit in self._units(Endpoint(EndpointKind.JIT, path, name))]
        if not units:
            return None
        closure = include_closure(self.tree, units, self.resolver)
        files = {path: self.tree.read_text(path) or "" for path in closure.files}
        refusals = host_checks(files, self.arch, all_majors())
        if not refusals:
            return None
        where = f"prebuilt cubins fetched by {target.name} ({target.path})"
        first = refusals[0]
        return Verdict(NEEDS_KERNEL_WORK, f"its code runs {where}, whose launcher refuses "
                       f"{self.arch.name} in C++ ({first.location}: {first.message}): no "
                       "source here builds the cubins, and kernels for it must be built and "
                       "published upstream",
                       [_evidence(f) for f in refusals],
                       units, refused=first, basis=Basis.HOST_REFUSAL)

    def _called_builders(self, target: Endpoint) -> list[str]:
        read = self._functions.get(target.path)
        if read is None:
            read = self._functions[target.path] = _functions(self.tree, target.path)
        node = read[0].get(target.name)
        if node is None:
            return []
        return list(dict.fromkeys(
            name for call in ast.walk(node) if isinstance(call, ast.Call)
            for name in [callee_name(call) or ""] if name.startswith("gen_")))

    def _builder_files(self) -> dict[str, list[str]]:
        """Where each ``gen_*`` function of the tree is defined, read once."""
        if self._builders is None:
            self._builders = {}
            for path in self.tree.paths():
                if path.endswith(".py"):
                    for name in _GEN_DEF.findall(self.tree.read_text(path) or ""):
                        self._builders.setdefault(name, []).append(path)
        return self._builders

    def _aot(self, target: Endpoint) -> Verdict | None:
        if self._ops is None:
            self._ops = aotops.OpIndex(self.tree)
        op = self._ops.find(target.name)
        if op is None:
            return None
        # as for a JIT module: the majors its build lists, where they leave the target out
        # (a unit named for another architecture is kernel work only then)
        omits = bool(op.majors) and self.arch.major not in op.majors
        verdict = units_verdict(self.tree, self.resolver, [op.unit], op.majors if omits else (),
                                self.arch)
        builds = ("its build lists " + ", ".join(f"sm_{m}x" for m in op.majors)
                  if op.majors else "its build's arch list is not read")
        verdict.reason = (f"its code calls the built op {target.name}, {op.function} in "
                          f"{op.unit} ({builds}): {verdict.reason}")
        verdict.at_stake = omits
        return verdict


def _table_of(chain: tuple[str, ...]) -> tuple[str, ...]:
    """The call chain up to its last dispatch table (``("a", "modules[]")``), or ()."""
    ends = [n for n, step in enumerate(chain) if step.endswith("[]")]
    return chain[:ends[-1] + 1] if ends else ()


def _via(verdict: Verdict, target: Endpoint) -> Verdict:
    """The verdict with the call chain that reaches it in its reason."""
    if not target.chain:
        return verdict
    return replace(verdict, reason=f"{verdict.reason} (reached through {'>'.join(target.chain)})")


def _functions(tree: SourceTree, path: str) -> tuple[dict[str, ast.AST], dict[str, list[str]]]:
    """The functions of a Python file by qualified name, and its tables of string
    literals (:func:`contrib.analysis.gates.module_strings`); empty when it does not parse."""
    text = tree.read_text(path)
    try:
        module = parse(text or "", path)
    except (SyntaxError, ValueError, *PARSE_ERRORS):
        return {}, {}
    found: dict[str, ast.AST] = {}
    stack: list[tuple[ast.AST, str]] = [(module, "")]
    while stack:
        node, prefix = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}.{child.name}" if prefix else child.name
                if not isinstance(child, ast.ClassDef):
                    found[name] = child
                stack.append((child, name))
            elif isinstance(child, ast.stmt):
                stack.append((child, prefix))
    return found, module_strings(module)
