"""The stack below: an upstream's gates followed into the upstream it runs on.

sglang calls flashinfer's public API (``flashinfer.comm.trtllm_allreduce_fusion``)
at the flashinfer version its packaging pins (:mod:`contrib.audit.stack.pins`).  The
code behind each of sglang's runtime gates is walked to those calls
(:mod:`contrib.audit.stack.walk`); each call is resolved to its function in the
flashinfer tree at the pinned tag (re-exports through ``__init__`` followed by
the same arch evaluator), and followed through flashinfer's own calls to the
gates those functions hold, read from the flashinfer audit of that tree (the
engine's, cached per tree).  What that yields, per upper gate:

* ``below``: the lower gates its code reaches;
* an excluding gate of class ``unknown`` takes its class from below: kernels missing
  below (a lower gate of class ``needs-kernel-work``, or one admitting the target
  into code compiled out for it) make it ``needs-kernel-work``; lower gates of
  class ``gate-only``, or a path below whose gates all admit the target with real
  kernels, make it ``gate-only``;
* a gate that *admits* the target while a lower gate refuses it is a
  *mismatch*: the target is sent down a path that has nothing for it (a lower
  gate that only falls back to a generic path is listed, not a mismatch).
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Generic, TypeVar, cast

from contrib import __version__, environ
from contrib.analysis.gates import DECORATOR
from contrib.analysis.pywalk import walk
from contrib.analysis.reach.backends import (
    configuring_if,
)
from contrib.analysis.reach.tree import PyTree
from contrib.analysis.tree import GitTree
from contrib.arch import Arch
from contrib.audit.classing.behind import Verdict
from contrib.audit.classing.judge import from_testers
from contrib.audit.engine import FORMAT, TreeAudit, audit_commit
from contrib.audit.finding.code import producers, readers_after, runs_after
from contrib.audit.finding.gates import scope_of
from contrib.audit.finding.leads import refuses_making, sibling_methods
from contrib.audit.finding.sites import named_backends
from contrib.audit.model import (
    GATE_ONLY,
    INTENTIONAL,
    NEEDS_KERNEL_WORK,
    RUNTIME,
    UNKNOWN,
    AuditGate,
    Basis,
    Below,
    Call,
    EffectKind,
    Evidence,
    Mismatch,
    Step,
    admits_text,
)
from contrib.audit.serial import (
    linked_cache,
    linked_from_cache,
    mismatch_cache,
    mismatch_from_cache,
)
from contrib.audit.stack.lower import Lower, package_roots
from contrib.audit.stack.reading import Function, Outside
from contrib.audit.stack.skips import Skips
from contrib.audit.stack.walk import Walker
from contrib.errors import ContribError
from contrib.git.repo import Git
from contrib.ui import counted
from contrib.workspace.txn import atomic_write, check_inside

# -- the upper side ---------------------------------------------------------------------


LINK_FORMAT = 14  # bump when linking changes what it finds over the same audits


@dataclass
class Linked:
    """The lower audit a link read, the mismatches, and the link's own seconds."""

    below: TreeAudit
    gates: list[AuditGate]  # the upper gates, linked
    mismatches: list[Mismatch]
    seconds: float
    cached: bool
    walker: Walker | None = None  # the upper tree's, when it was walked: what it parsed is kept


def audit_and_link(upper: list[AuditGate], tree: GitTree, tree_sha: str, git: Git, name: str,
                   tag: str, commit: str, arch: Arch, step: Step | None = None) -> Linked:
    """Audit the lower upstream ``name`` at ``tag`` (``commit`` of ``git``) and link the
    upper gates to it (:func:`link`), kept in the cache under both trees, the arch and
    contrib's version.  Not cached, the upper tree's half of the link
    (:func:`upper_calls`) runs in a thread while the lower tree is audited, whose
    workers are other processes: the two overlap."""
    below_tree = git.run("rev-parse", f"{commit}^{{tree}}").strip()
    key = hashlib.sha256(f"stack\0{tree_sha}\0{below_tree}\0{tag}\0{arch.name}\0"
                         f"{__version__}\0{FORMAT}\0{LINK_FORMAT}".encode()).hexdigest()
    path = environ.cache_root() / "audit" / f"stack-{key[:32]}.json"
    kept = _load_link(path, upper)
    lower_tree = GitTree(git, commit)
    walk: _Background[list[list[Outside] | None]] | None = None
    walker: Walker | None = None
    if kept is None:
        roots = package_roots(p for p in lower_tree.paths() if p.endswith(".py"))
        walker = walker_of(upper, tree, roots)
        walk = _Background(lambda: upper_calls(upper, tree, roots, walker))
    below = audit_commit(git, commit, arch, step)
    started = time.monotonic()
    if kept is not None:
        return Linked(below, *kept, time.monotonic() - started, True, None)
    assert walk is not None
    lower = Lower(name, tag, commit, below, lower_tree, arch=arch)
    linked, mismatches = link(upper, tree, lower, arch, walk.result())
    with contextlib.suppress(ContribError):
        check_inside(environ.cache_root(), path)
        atomic_write(path, json.dumps({"gates": [linked_cache(g) for g in linked],
                                       "mismatches": [mismatch_cache(m) for m in mismatches]}))
    return Linked(below, linked, mismatches, time.monotonic() - started, False, walker)


_T = TypeVar("_T")


class _Background(Generic[_T]):
    """``make()`` run in a daemon thread (an interrupt of the main thread does not wait
    for it); :meth:`result` waits, and raises what it raised."""

    def __init__(self, make: Callable[[], _T]) -> None:
        self._make = make
        self._value: _T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="contrib-link", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._make()
        except BaseException as exc:  # handed to the caller of result()
            self._error = exc

    def result(self) -> _T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return cast(_T, self._value)


def _load_link(path: Path, upper: list[AuditGate]
               ) -> tuple[list[AuditGate], list[Mismatch]] | None:
    """The linked gates and mismatches kept at ``path``; None when absent, damaged or
    from another audit (link again)."""
    try:
        check_inside(environ.cache_root(), path)
        if path.is_symlink():
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        changes, kept = data["gates"], data["mismatches"]
    except (OSError, ValueError, KeyError, TypeError, RecursionError, ContribError):
        return None
    if not (isinstance(changes, list) and len(changes) == len(upper) and isinstance(kept, list)):
        return None
    gates = [linked_from_cache(g, c) for g, c in zip(upper, changes, strict=True)]
    mismatches = [mismatch_from_cache(m) for m in kept]
    if any(g is None for g in gates) or any(m is None for m in mismatches):
        return None
    return [g for g in gates if g is not None], [m for m in mismatches if m is not None]


def link(upper: list[AuditGate], tree: GitTree, lower: Lower, arch: Arch,
         calls: list[list[Outside] | None] | None = None
         ) -> tuple[list[AuditGate], list[Mismatch]]:
    """The upper gates with ``below`` (and the class from below) set, and the
    mismatches.  ``calls``: :func:`upper_calls` of these gates, when walked already."""
    if calls is None:
        calls = upper_calls(upper, tree, lower.roots)
    linked, mismatches = [], []
    for gate, out_calls in zip(upper, calls, strict=True):
        if out_calls is None:
            linked.append(gate)
            continue
        reached: dict[tuple[str, int], tuple[Outside, AuditGate, Call]] = {}
        for out in out_calls:
            for b, chain in lower.below(out.dotted, out.keys):
                reached.setdefault((b.file, b.line), (out, b, chain))  # the first way there
        pairs = sorted(reached.values(), key=lambda p: (p[1].file, p[1].line))
        gate = replace(gate, below=tuple(_entry(lower, out, b, chain) for out, b, chain in pairs))
        if gate.excludes_target and gate.class_ in (UNKNOWN, GATE_ONLY):
            # gate-only above is an absence of kernel work in this tree: kernels missing
            # below still make it needs-kernel-work (a Triton helper above is not the
            # attention kernel flashinfer runs); nothing else below changes it.
            found = (_inherit(gate, lower, [(out, b) for out, b, _ in pairs], arch) if pairs
                     else _from_code_below(gate, lower, out_calls, arch))
            if found is not None and (gate.class_ != GATE_ONLY
                                      or found.class_ == NEEDS_KERNEL_WORK):
                gate = found
        refusing = [(out, b) for out, b, _ in pairs if _refuses(b)]
        if not gate.excludes_target and refusing:
            mismatches.append(_mismatch(gate, lower, refusing, arch))
        linked.append(gate)
    # returned values whose testers took a class from below
    return from_testers(tree, linked), mismatches


def upper_calls(upper: list[AuditGate], tree: GitTree, roots: Iterable[str],
                walker: Walker | None = None) -> list[list[Outside] | None]:
    """Per upper gate, the calls into the lower package (its top-level ``roots``) that
    the code it decides about reaches (None: a gate that decides nothing the walk reads).
    The upper tree's half of :func:`link`: it needs no audit of the lower tree."""
    walker = walker or walker_of(upper, tree, roots)
    decisions: dict[str, list[ast.AST]] = {}
    found: list[list[Outside] | None] = []
    for gate in upper:
        start = _start(walker, gate, decisions)
        if start is None:
            found.append(None)
            continue
        calls = list(walker.outside(gate.file, *start, target=not gate.excludes_target))
        holder = start[0]
        if (gate.excludes_target and not calls and holder is not None
                and isinstance(walker.parents(gate.file).get(id(holder)), ast.Module)):
            # a decision function of the module (`_resolve_backend()` refuses the target):
            # what its callers run with its answer is what it keeps from the target
            calls = walker.through_callers(holder)
        if gate.excludes_target and refuses_making(start[0], gate.line, gate.parser_kind):
            for method in sibling_methods(start[0], walker.parents(gate.file)):
                calls += [c for c in walker.outside(gate.file, method, method.body)
                          if c not in calls]  # the object it would make runs them
        found.append(calls)
    return found


def walker_of(upper: list[AuditGate], tree: GitTree, roots: Iterable[str]) -> Walker:
    """The walker of ``tree``'s code, with its audited gates ``upper`` as the skips."""
    paths = [p for p in tree.paths() if p.endswith(".py")]
    ev = PyTree(tree.read_text, paths)
    texts: dict[str, str] = {}

    def every_text() -> dict[str, str]:
        if not texts:
            texts.update((p, tree.read_text(p) or "") for p in paths
                         if scope_of(p, "", "") == RUNTIME)
        return texts

    lines: dict[str, list[int]] = {}
    for gate in upper:
        if gate.excludes_target:
            lines.setdefault(gate.file, []).append(gate.line)

    def excluded(path: str, first: int, last: int) -> bool:
        return any(first <= line <= last for line in lines.get(path, ()))

    return Walker(ev, every_text, set(roots), excluded, Skips(upper))


def _start(walker: Walker, gate: AuditGate, decisions: dict[str, list[ast.AST]]
           ) -> tuple[Function | None, tuple[ast.AST, ...]] | None:
    """The code a gate decides about, and the function holding it: the body of the
    ``if`` it tests (what admitted archs run, or the target when it takes the
    branch), or the function a refusing decorator sits on.  ``decisions``: each
    file's ifs, whiles and functions (kept)."""
    if gate.scope != RUNTIME or not (gate.excludes_target
                                     or gate.effect.kind == EffectKind.TAKES_BRANCH):
        return None
    if gate.file not in decisions:
        module = walker.ev.module(gate.file)
        decisions[gate.file] = [] if module is None else [
            n for n in walk(module[0]) if isinstance(n, ast.If | ast.While | Function)]
    best: ast.If | ast.While | None = None
    for node in decisions[gate.file]:
        if isinstance(node, ast.If | ast.While):
            if node.test.lineno <= gate.line <= (node.test.end_lineno or node.test.lineno):
                best = node if best is None or node.lineno > best.lineno else best
        elif isinstance(node, Function) and gate.parser_kind == DECORATOR and any(
                d.lineno <= gate.line <= (d.end_lineno or d.lineno)
                for d in node.decorator_list):
            return node, tuple(node.body)
    parents = walker.parents(gate.file)
    if best is None:
        return _rest_of_function(walker, gate, parents)
    if gate.parser_kind == "skip-condition" and gate.excludes_target:
        code = tuple(runs_after(best, parents))  # `if not ok: raise`: what runs past it
        # and the backend its test names (`if backend == "trtllm_mha" and not is_sm100()`)
        code += tuple(named_backends(best.test))
        function = walker.holder(gate.file, best)  # and the backend it is the refusal of
        around = configuring_if(function, best, parents) if function is not None else None
        code += tuple(named_backends(around.test)) if around is not None else ()
    else:
        code = tuple(best.body)
        if isinstance(best, ast.If) and gate.excludes_target:
            # what admitted archs run: the body, and the code reading what it binds.  The
            # target's own way is the body: a function reading a name it imported runs
            # only where it is called, and that call's own gate is the one to read
            code += readers_after(best, parents) + producers(best, parents)
    return walker.holder(gate.file, best), code


def _rest_of_function(walker: Walker, gate: AuditGate, parents: dict[int, ast.AST]
                      ) -> tuple[Function | None, tuple[ast.AST, ...]] | None:
    """A gate that is no ``if`` test (``if cond: raise`` read as a refusal, an assert,
    a returned value): what its function runs after the gate's statement."""
    module = walker.ev.module(gate.file)
    if module is None or not gate.excludes_target:
        return None
    statement = next((n for n in walk(module[0]) if isinstance(n, ast.stmt)
                      and not isinstance(n, Function | ast.ClassDef)
                      and n.lineno <= gate.line <= (n.end_lineno or n.lineno)
                      and isinstance(parents.get(id(n)), Function)), None)
    if statement is None:
        return None
    holder = parents.get(id(statement))
    body = list(getattr(holder, "body", []))
    if statement not in body:
        return None
    return walker.holder(gate.file, statement), tuple(body[body.index(statement):])


def _hollow(gate: AuditGate) -> bool:
    """Kernels are missing for the target there: a gate of class needs-kernel-work, or
    one admitting it into code compiled out for it (its evidence)."""
    return ((gate.excludes_target and gate.class_ == NEEDS_KERNEL_WORK)
            or (not gate.excludes_target and bool(gate.evidence)))


def _refuses(gate: AuditGate) -> bool:
    """The target gets an error there (not a generic path)."""
    return gate.excludes_target and gate.effect.kind.refuses


def _where(gate: AuditGate) -> str:
    return f"{gate.file}:{gate.line} {gate.function}"


def _entry(lower: Lower, out: Outside, gate: AuditGate, chain: Call) -> Below:
    """The lower gate ``gate``, reached by ``out`` and then ``chain`` (from the function
    ``out`` calls)."""
    return Below(lower.name, lower.tag, lower.commit, gate.file, gate.line, gate.function,
                 gate.admits, gate.excludes_target, gate.class_, gate.effect.why, out.dotted,
                 (*out.via, out.dotted, *chain[1:]))


def _inherit(gate: AuditGate, lower: Lower, reached: list[tuple[Outside, AuditGate]],
             arch: Arch) -> AuditGate | None:
    """Class an excluding gate by the lower path its code reaches: kernels missing there
    (a lower gate of class needs-kernel-work, or one admitting the target into code
    compiled out for it) make it needs-kernel-work, unless the call chose that path by
    a backend where the same call serves the target another way
    (:func:`_served_otherwise`); lower gates that only turn the target away from
    kernels it can run make it gate-only (each gate on the path is lifted, nothing
    else); a path whose lower gates cannot be classed leaves it (None)."""
    at = f"{lower.name} {lower.tag}"
    below = [b for _, b in reached]
    hollow = [(out, b) for out, b in reached if _hollow(b)]
    if hollow:
        out, b = hollow[0]
        why = f"turns {arch.name} away ({b.class_})" if b.excludes_target else (
            f"admits {arch.name}, but its kernels are compiled out for it")
        served = [_served_otherwise(lower, o) for o, _ in hollow]
        if served[0] is not None and all(served):
            chosen, name, other = served[0]
            return gate.classed(GATE_ONLY, Basis.SERVED_OTHERWISE,
                                f"its code calls {at} {out.dotted} choosing "
                                f"{chosen!r}, whose way reaches {_where(b)}, which {why}; "
                                f"{name!r} of the same call serves {arch.name} ({other.file}:"
                                f"{other.line} admits it): choosing {name!r} on {arch.name} is "
                                "the change", (_at(lower, other),))
        detail = b.reason or b.effect.why
        return gate.classed(NEEDS_KERNEL_WORK, Basis.BELOW_HOLLOW,
                            f"its code reaches {at} {_where(b)}, which {why}"
                            + (f": {detail}" if detail else ""),
                            tuple(e.below(lower.name) for e in b.evidence[:20]))
    gated = [b for b in below if b.excludes_target]
    # A lower gate that leaves the target out on purpose (flashinfer's MNNVL allreduce,
    # beside the single-node one that admits it) is one way the path does not take;
    # where it is the only way, the intent is upstream's below.
    others = [b for b in gated if b.class_ != INTENTIONAL]
    if gated and not others and len(gated) == len(below):
        b = gated[0]
        return gate.classed(INTENTIONAL, Basis.BELOW_INTENT,
                            f"its code reaches {at} {_where(b)}, which leaves "
                            f"{arch.name} out on purpose: {b.reason}", (_at(lower, b),))
    gated = others
    if any(b.class_ not in (GATE_ONLY, None) for b in gated):
        return None  # a lower gate of unknown class: the path's cost is not known
    if gated:
        b = gated[0]
        return gate.classed(GATE_ONLY, Basis.BELOW_GATED,
                            f"its code reaches {at} {_where(b)}, which turns "
                            f"{arch.name} away from kernels it can run ({b.class_}): lifting "
                            "both gates is the change" + (f"; there {b.reason}" if b.reason else ""))
    admitting = [b for b in below if not b.excludes_target]
    one = len(admitting) == 1
    return gate.classed(GATE_ONLY, Basis.BELOW_ADMITS, f"its code reaches {at}, whose "
                        f"{counted(len(admitting), 'gate')} on that path admit{'s' if one else ''} "
                        f"{arch.name} with {'its' if one else 'their'} kernels "
                        f"({'' if one else 'e.g. '}{_where(admitting[0])})")


def _at(lower: Lower, gate: AuditGate) -> Evidence:
    """A lower gate as the evidence of a class above."""
    return Evidence(f"{gate.file}:{gate.line}", gate.file, upstream=lower.name, line=gate.line)


def _served_otherwise(lower: Lower, out: Outside) -> tuple[str, str, AuditGate] | None:
    """Another backend of the registry ``out`` chooses from, whose way below meets no
    kernels missing for the target and no refusal of it, and a gate admitting it
    (flashinfer's ``gemm_fp8_nt_groupwise``: its trtllm backend runs cubins made for
    sm_10x only, its cutlass backend admits SM120 and builds for it): the call may
    choose that one on the target: the backend chosen, that one, and the gate.  None:
    the call chooses no backend by name, or no other serves the target."""
    key = lower.chosen(out.dotted, out.keys) if out.keys else None
    if key is None:
        return None
    chosen, names = key
    taken = {(g.file, g.line) for g, _ in lower.below(out.dotted, out.keys)}
    for name in sorted(names - {chosen}):
        keys = tuple((k, name if v == chosen else v) for k, v in out.keys)
        way = [g for g, _ in lower.below(out.dotted, keys)]
        if any(_hollow(g) or _refuses(g) for g in way):
            continue
        admitting = sorted((g for g in way if not g.excludes_target),
                           key=lambda g: (g.file, g.line) in taken)
        if admitting:
            return chosen, name, admitting[0]
    return None


def _from_code_below(gate: AuditGate, lower: Lower, calls: list[Outside],
                     arch: Arch) -> AuditGate | None:
    """Class an excluding gate whose calls into the lower upstream meet no gate there by
    what those calls reach (its JIT modules, kernels), the worst first; None: nothing
    they reach can be classed."""
    worst: tuple[int, Verdict, Outside] | None = None
    for out in dict.fromkeys(calls):
        verdict = lower.behind(out.dotted, arch, out.keys)
        if verdict is None:
            continue
        rank = (0 if verdict.class_ == NEEDS_KERNEL_WORK else 1)
        if worst is None or rank < worst[0]:
            worst = (rank, verdict, out)
    if worst is None:
        return None
    _, verdict, out = worst
    return gate.classed(verdict.class_, Basis.BELOW_CODE,
                        f"its code calls {lower.name} {lower.tag} {out.dotted}, "
                        f"on a path with no gate; there {verdict.reason}",
                        tuple(e.below(lower.name) for e in verdict.evidence[:20]))


def _mismatch(gate: AuditGate, lower: Lower, refusing: list[tuple[Outside, AuditGate]],
              arch: Arch) -> Mismatch:
    out, b = refusing[0]
    path = " > ".join((*out.via, out.dotted))
    more = f" (and {len(refusing) - 1} more below)" if len(refusing) > 1 else ""
    message = (f"{gate.file}:{gate.line} admits {arch.name} ({admits_text(gate.admits)}), but its code "
               f"reaches {out.dotted} ({path}), where {lower.name} {lower.tag} {b.file}:{b.line} "
               f"{b.function} admits {admits_text(b.admits)}: {b.effect.why}; {arch.name} crashes "
               f"there{more}")
    below = next(e for e in gate.below if (e.file, e.line) == (b.file, b.line))
    return Mismatch(gate.file, gate.line, gate.function, below, message)
