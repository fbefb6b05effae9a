"""Every architecture gate of a Python file, and what it does to the target.

The shared gate parser (:mod:`contrib.analysis.gates`) finds where a value the
GPU decides chooses what runs; :mod:`contrib.audit.finding.effect` says whether that
refuses the target, keeps it on a generic path (both exclude) or serves it.  The
code a gate keeps from the target is followed through the tree's calls
(:mod:`contrib.analysis.reach`); when it reaches nothing, the leads of
:mod:`contrib.audit.finding.leads` are tried in their order.
"""

from __future__ import annotations

import ast
import contextlib
import gc
import re
from collections.abc import Iterator
from pathlib import PurePosixPath

from contrib.analysis.gates import (
    DECORATOR,
    KEYWORD,
    Gate,
    Scan,
    scan,
)
from contrib.analysis.jitsources import builders, built_sources
from contrib.analysis.opening import Spans, opening
from contrib.analysis.pywalk import parents as node_parents
from contrib.analysis.reach.backends import (
    configuration_key,
    configuring_if,
)
from contrib.analysis.reach.endpoints import own_build
from contrib.analysis.reach.tree import PyTree
from contrib.analysis.reach.walk import Reached, reach
from contrib.arch import Arch
from contrib.audit.finding.effect import effect as gate_effect
from contrib.audit.finding.leads import Gated, follow_leads
from contrib.audit.finding.sites import CallSites
from contrib.audit.model import (
    BENCHMARK,
    CAPABILITY,
    EXAMPLE,
    JIT,
    PREDICATE,
    RUNTIME,
    TEST,
    AuditGate,
    EffectKind,
    GateKind,
    Scope,
)

_PREDICATE_TEXT = re.compile(r"\b_*is_(?:cuda_)?(?:sm_?\d|ampere|ada|hopper|blackwell)", re.I)


_REFUSAL_WORDS = re.compile(
    r"\b(?:not|no|unsupported|exclud\w*|intentional\w*|on purpose|deliberate\w*|skip\w*|"
    r"disabl\w*|lacks?|doesn't|don't|won't|cannot|can't|"
    # served by another path of its own, on purpose: a different, separate, dedicated or
    # own path, kernel, implementation, backend or route, a few words apart at most
    r"(?:different|separate|dedicated|own)\W+(?:\w+\W+){0,3}?"
    r"(?:paths?|kernels?|implementations?|backends?|routes?))\b",
    re.I)


_TO_DO = re.compile(r"\b(?:not yet|yet to|todo|fixme|for now|currently|temporar\w*|"
                    r"work in progress|wip|until)\b", re.I)


_SENTENCE = re.compile(r"(?<=[.;!?])\s+")


_COMMENT = re.compile(r"#(.*)$")


def family_pattern(arch: Arch) -> re.Pattern[str]:
    """How a comment names the target's family: ``sm120``, ``SM12x``, ``sm_120a``, ``12.0``."""
    m = arch.major
    return re.compile(
        rf"\bsm_?{m}(?:\d|x)\w*\b|\b{m}\.[0-9x]\b|\bcompute capability {m}\b|\bcc ?{m}\b", re.I
    )


def scope_of(path: str, function: str, text: str) -> Scope:
    """``test``, ``benchmark``, ``example`` or ``runtime``: by path, then by test function
    or skip marker.  An example (``examples/pytorch/flashinfer_modules.py``) is sample
    code for users beside the package, not what the package runs."""
    parts = [p.lower() for p in PurePosixPath(path).parts]
    name = parts[-1]
    if any(p in ("examples", "example") for p in parts[:-1]):
        return EXAMPLE
    if any(p in ("benchmarks", "benchmark", "bench") for p in parts[:-1]) or name.startswith(
        ("bench_", "benchmark_")
    ):
        return BENCHMARK
    if (
        any(p in ("tests", "test", "testing") for p in parts[:-1])
        or name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"
        or any(part.startswith(("test_", "Test")) for part in function.split("."))
        or "skipif" in text or "pytest.skip" in text
    ):
        return TEST
    return RUNTIME


def gates_of_file(path: str, text: str, arch: Arch, ev: PyTree | None = None,
                  wide: PyTree | None = None) -> list[AuditGate]:
    """The audited gates of one Python file; ``ev``: the tree's evaluator, shared by the
    files of one tree; ``wide``: one that reads every file, to follow calls (``ev``
    when None).  A file that does not parse raises one of
    :data:`~contrib.analysis.pyparse.PARSE_ERRORS`: the engine notes it as not audited."""
    if ev is None:
        ev = PyTree({path: text}.get, [path])  # the file read alone
    with collector_paused():
        found = scan(path, text, ev, arch)
        if not found.gates:
            return []
        parents = node_parents(found.module)
        lines = text.splitlines()
        follow = wide or ev
        follow.add_module(path, found.module)
        sites = CallSites(found, follow, (arch.major, arch.minor))
        spans = Spans(found.module, parents)
        audited = [_audited(found, gate, parents, lines, arch, sites, spans)
                   for gate in found.gates]
    return [g for g in audited if g.effect.kind != EffectKind.PREDICATE_VALUE]


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cycle collector while a module is scanned and its gates audited:
    the syntax tree and the evaluator's caches are hundreds of thousands of objects
    that live on, and every collection walks them all again (a 4,000-gate file took
    40% longer with it on during the scan, and 4.8 x the 1,000-gate file's time with it
    on while its gates were audited)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _audited(found: Scan, gate: Gate, parents: dict[int, ast.AST], lines: list[str],
             arch: Arch, sites: CallSites, spans: Spans) -> AuditGate:
    path = gate.file
    function = found.functions.get(gate.function)
    effect = gate_effect(found, gate, parents, arch)
    jit = gate.kind == KEYWORD and function is not None
    frame = found.frames.get(gate.function, found.frames["<module>"])
    # a gate inside a backend's branch (`if backend == "trtllm_mla": if not sm100: raise`)
    # guards what runs with that backend: the rest of the function goes its way
    configured, key = None, None
    if effect.excludes and function is not None and gate.node is not None:
        configured = configuring_if(function, gate.node, parents)
        key = configuration_key(function, configured) if configured is not None else None
    behind = reach(sites.follow, frame, list(effect.code), (arch.major, arch.minor), key)
    own = own_build(sites.follow, frame, function, gate.function, list(effect.code)) \
        if effect.excludes and not jit else None
    if own is not None:  # a gate in a JIT builder: the build it guards is its function's
        behind = Reached(behind.calls, [own, *behind.endpoints])
    if effect.excludes and not behind.endpoints:
        gated = Gated(found, gate, function, parents, frame, effect, configured, sites)
        behind = follow_leads(gated, behind)
    return AuditGate(
        file=path, line=gate.line, function=gate.function, kind=_kind(gate),
        admits=gate.admits, excludes_target=effect.excludes, text=gate.text,
        effect=effect.decision(), message=effect.message,
        scope=scope_of(path, gate.function, gate.text), comment=_comment(lines, gate),
        units=tuple(built_sources(found.functions, gate.function, arch.major, found.strings))
        if jit else (),
        builders=tuple(builders(found.functions, gate.function, found.strings)[1:]) if jit else (),
        calls=tuple(behind.calls), reached=tuple(behind.endpoints), index=gate.index,
        parser_kind=gate.kind, end_line=gate.end_line,
        opens=opening(spans, gate.line, max(gate.line, gate.end_line), arch,
                      jit=gate.kind == KEYWORD).opens if effect.excludes else None,
    )


def _kind(gate: Gate) -> GateKind:
    if gate.kind == KEYWORD:
        return JIT
    if gate.kind == DECORATOR:
        return CAPABILITY
    return PREDICATE if _PREDICATE_TEXT.search(gate.text) else CAPABILITY


def _comment(lines: list[str], gate: Gate) -> str:
    """The ``#`` comments just above the gate and on its lines, joined."""
    picked: list[str] = []
    above = gate.line - 2
    while above >= 0 and lines[above].strip().startswith("#") and gate.line - above <= 6:
        picked.insert(0, lines[above].strip()[1:].strip())
        above -= 1
    for number in range(gate.line - 1, min(gate.end_line, len(lines))):
        match = _COMMENT.search(lines[number])
        if match and "'" not in match.string[: match.start()] and '"' not in lines[number]:
            picked.append(match[1].strip())
    return " ".join(p for p in picked if p)[:300]


def says_intentional(comment: str, arch: Arch) -> bool:
    """Whether ``comment`` says the target's family is left out on purpose (not "not
    yet", "for now", "TODO": work to come is not a choice)."""
    family = family_pattern(arch)
    return any(family.search(sentence) and _REFUSAL_WORDS.search(sentence)
               and not _TO_DO.search(sentence) for sentence in _SENTENCE.split(comment))
