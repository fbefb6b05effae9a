"""Every architecture gate of a Python file, and what it does to the target.

The shared gate parser (:mod:`contrib.analysis.gates`) finds where a value the
GPU decides chooses what runs; :mod:`contrib.audit.effect` says whether that
refuses the target, keeps it on a generic path (both exclude) or serves it.
The code a gate keeps from the target is followed through the tree's calls
(:mod:`contrib.analysis.reach`) so the judge can class it by what it reaches.
"""

from __future__ import annotations

import ast
import contextlib
import gc
import re
from collections.abc import Iterable, Iterator
from pathlib import PurePosixPath

from contrib.analysis.archvalues import Cap, Frame, Func
from contrib.analysis.gates import DECORATOR, KEYWORD, Gate, Scan, builders, built_sources, scan
from contrib.analysis.pywalk import own_nodes, passes_on, single_assignment, walk
from contrib.analysis.pywalk import parents as node_parents
from contrib.analysis.reach.backends import (
    Key,
    configuration_key,
    configuring_if,
    decorator_arguments,
    handed,
    spread_literals,
)
from contrib.analysis.reach.names import distinctive
from contrib.analysis.reach.targets import CHECKS, Endpoint, own_build
from contrib.analysis.reach.tree import CallSites as _Calls
from contrib.analysis.reach.tree import PyTree
from contrib.analysis.reach.walk import Reached, reach
from contrib.analysis.refusal import may_stop
from contrib.arch import Arch
from contrib.audit.effect import effect as gate_effect
from contrib.audit.effect import function_of, runs_after
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
    r"disabl\w*|lacks?|doesn't|don't|won't|cannot|can't)\b", re.I)  # fmt: skip
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
    ):  # fmt: skip
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
        audited = [_audited(found, gate, parents, lines, arch, sites) for gate in found.gates]
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
             arch: Arch, sites: CallSites) -> AuditGate:  # fmt: skip
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
        behind = Reached(behind.calls, [own, *behind.targets])
    if effect.excludes and not behind.targets:
        # a call of its function may not return: what runs after the call is behind it
        stops = effect.kind.stops or sites.may_stop(function)
        behind = _from_callers(found, gate.function, parents, behind, sites, stops)
        if not behind.targets and function is not None and _decides(gate.function):
            behind = _from_other_callers(path, function, behind, sites, stops)
    if effect.excludes and not behind.targets:
        behind = _from_registrations(found, gate.function, behind, sites)
    if effect.excludes and not behind.targets and refuses_making(function, gate.line, gate.kind):
        behind = _from_methods(found, function, parents, behind, sites)
    elif effect.excludes and not behind.targets:
        behind = _from_configuration(found, function, gate.line, parents, behind, sites)
    if effect.excludes and not behind.targets and gate.node is not None:
        behind = _from_named_backends(gate.node, frame, behind, sites)
    if effect.excludes and not behind.targets and configured is not None:  # what it runs
        behind = _from_named_backends(configured.test, frame, behind, sites)
    if effect.excludes and not behind.targets and function is not None:
        behind = _from_chosen_returns(path, function, list(effect.code), behind, sites)
    if effect.excludes and not behind.targets and only_checks(effect.code):
        behind = Reached(behind.calls, [Endpoint(CHECKS, path, gate.function)])
    return AuditGate(
        file=path, line=gate.line, function=gate.function, kind=_kind(gate),
        admits=gate.majors, excludes_target=effect.excludes, text=gate.text,
        effect=effect.decision(), message=effect.message,
        scope=scope_of(path, gate.function, gate.text), comment=_comment(lines, gate),
        units=built_sources(found.functions, gate.function, arch.major, found.strings) if jit else [],
        builders=builders(found.functions, gate.function, found.strings)[1:] if jit else [],
        calls=behind.calls, reached=tuple(behind.targets), index=gate.index,
        parser_kind=gate.kind, end_line=gate.end_line,
    )  # fmt: skip


_LOG_CALLS = frozenset({"debug", "info", "warning", "warn", "warning_once", "info_once",
                        "error", "critical", "print"})  # fmt: skip


def only_checks(code: Iterable[ast.AST]) -> bool:
    """Whether ``code`` (what a gate keeps from the target) only checks: asserts,
    raises and log lines, in ``if`` branches or not (sglang's ``if is_blackwell():
    assert attention_backend == "triton", "..."``).  It runs no kernel, so admitting
    the target to it is a change of gate lines only.  Read without recursion (an
    ``elif`` chain is one ``if`` nested in the next)."""
    todo = list(code)
    if not todo:
        return False
    while todo:
        statement = todo.pop()
        if isinstance(statement, ast.If):
            todo += [*statement.body, *statement.orelse]
        elif not (isinstance(statement, ast.Assert | ast.Raise | ast.Pass)
                  or isinstance(statement, ast.Expr) and (
                      isinstance(statement.value, ast.Constant)
                      or isinstance(statement.value, ast.Call) and _logs(statement.value))):  # fmt: skip
            return False
    return True


def _logs(call: ast.Call) -> bool:
    func = call.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(
        func, ast.Attribute) else ""  # fmt: skip
    return name in _LOG_CALLS and not any(isinstance(n, ast.Call) for a in call.args
                                          for n in walk(a))  # fmt: skip


def _decides(function: str) -> bool:
    """Whether a function may be a decision function: no test, no method (a method's
    callers are an object's, found through the object)."""
    return "." not in function and not function.startswith("test") and function != "<module>"


def _from_callers(found: Scan, function: str, parents: dict[int, ast.AST],
                  own: Reached, sites: CallSites, stops: bool) -> Reached:  # fmt: skip
    """A gate in a decision function (``_skip_if_unsupported()``, ``def _use_fused():
    return is_sm100()``) guards what its callers run: the branch an ``if`` on it takes
    (the else of ``if not f():``), and, when the gate ``stops`` the call (it refuses:
    raises, skips, exits), the code after each call in the caller's block.  A gate
    that only picks a value (``backend = "cutedsl" if is_sm100() else "cutlass"``)
    decides nothing its caller runs next.  The callers of its file, resolved by
    identity; a test function is no decision."""
    node = found.functions.get(function)
    if node is None or any(p.startswith("test") for p in function.split(".")):
        return own
    out = Reached(list(own.calls), list(own.targets))
    for caller, code in sites.of(node, parents, after=stops):
        frame = found.frames.get(caller, found.frames["<module>"])
        _join(out, reach(sites.follow, frame, code, sites.cap), caller)
    return out


def _from_registrations(found: Scan, function: str, own: Reached, sites: CallSites) -> Reached:
    """A check handed to the decorator of another function of its file guards that
    function: flashinfer's ``@backend_requirement({"cutlass": _cutlass_requirement},
    common_check=_check_problem_size)`` on ``mm_bf16``.  Under a backend's name it
    guards what the function runs for that backend (tests of the registry's names
    decided by it); as a plain argument, the whole function."""
    out = Reached(list(own.calls), list(own.targets))
    for decorated, key in sites.registered(function):
        node = sites.found.functions.get(decorated)
        frame = found.frames.get(decorated, found.frames["<module>"])
        _join(out, reach(sites.follow, frame, list(getattr(node, "body", [])), sites.cap, key),
              decorated)
    return out


_MAKES = ("__init__", "setUp", "setUpClass")  # what runs before any other method does


def refuses_making(function: ast.AST | None, line: int, kind: str) -> bool:
    """Whether a gate at ``line`` refuses making any object of the class whose
    ``__init__`` is ``function``, or running any test of the test case whose ``setUp``
    or ``setUpClass`` it is (``raise unittest.SkipTest(...)``): a decorator on it, or a
    statement of its own body (not one nested in a branch of it: ``if
    backend.is_cutlass(): assert is_sm90()`` refuses one configuration, not the object)."""
    if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef) or function.name not in _MAKES:
        return False
    if kind == DECORATOR:
        return True
    holding = [n for n in walk(function) if isinstance(n, ast.stmt) and n is not function
               and n.lineno <= line <= (n.end_lineno or n.lineno)]  # fmt: skip
    return bool(holding) and max(holding, key=lambda n: n.lineno) in function.body


def sibling_methods(init: ast.AST | None, parents: dict[int, ast.AST]
                    ) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:  # fmt: skip
    """The other methods of the class whose ``__init__`` is ``init``: what the object it
    makes runs."""
    owner = parents.get(id(init)) if init is not None else None
    if not isinstance(owner, ast.ClassDef):
        return []
    return [n for n in owner.body
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n is not init]


def _from_methods(found: Scan, function: ast.AST | None, parents: dict[int, ast.AST],
                  own: Reached, sites: CallSites) -> Reached:  # fmt: skip
    """A gate refusing in a class's ``__init__`` (flashinfer's
    ``@supported_compute_capability([100, 103])`` on ``CuteDslMoEWrapper.__init__``)
    guards every method of the object it would make: what those run stands behind it."""
    out = Reached(list(own.calls), list(own.targets))
    for method in sibling_methods(function, parents):
        path = found.frames["<module>"].path
        frame = Frame(path, sites.follow.function_scope(method), None, id(method))
        _join(out, reach(sites.follow, frame, list(method.body), sites.cap), method.name)
    return out


def configuration_tests(init: ast.AST | None, line: int) -> list[ast.expr]:
    """The tests of the branches of ``__init__`` that hold the statement at ``line``
    (``if get_moe_runner_backend().is_cutlass(): assert is_sm90_supported()``): the
    configuration a refusal there is about."""
    if not isinstance(init, ast.FunctionDef | ast.AsyncFunctionDef) or init.name != "__init__":
        return []
    return [n.test for n in walk(init) if isinstance(n, ast.If)
            and any(s.lineno <= line <= (s.end_lineno or s.lineno) for s in n.body)]


def _from_configuration(found: Scan, init: ast.AST | None, line: int,
                        parents: dict[int, ast.AST], own: Reached,
                        sites: CallSites) -> Reached:  # fmt: skip
    """A refusal in ``__init__`` under a configuration (sglang's ``Fp8MoEMethod``: ``if
    get_moe_runner_backend().is_cutlass(): assert is_sm100_supported() or
    is_sm90_supported()``) guards what the object's other methods run under the same
    test (``apply``'s ``if get_moe_runner_backend().is_cutlass(): cutlass_fused_experts_fp8(...)``):
    the object made in that configuration runs those branches."""
    tests = {ast.dump(t) for t in configuration_tests(init, line)}
    if not tests:
        return own
    out = Reached(list(own.calls), list(own.targets))
    path = found.frames["<module>"].path
    for method in sibling_methods(init, parents):
        branches = [n.body for n in walk(method) if isinstance(n, ast.If)
                    and ast.dump(n.test) in tests]  # fmt: skip
        if not branches:
            continue
        frame = Frame(path, sites.follow.function_scope(method), None, id(method))
        _join(out, reach(sites.follow, frame, [s for body in branches for s in body], sites.cap),
              method.name)
    return out


def _from_named_backends(test: ast.expr, frame: Frame, own: Reached, sites: CallSites) -> Reached:
    """A gate whose test also names a backend (sglang's ``if prefill_backend ==
    "trtllm_mha" and not is_sm100_supported(): raise``) turns the target away from that
    backend: what the tree registers under the name stands behind it, as when the name
    is handed on (:func:`named_backends`)."""
    named = named_backends(test)
    if not named:
        return own
    out = Reached(list(own.calls), list(own.targets))
    _join(out, reach(sites.follow, frame, list(named), sites.cap))
    return out


_MAX_CALLER_FILES = 12  # files calling one function, at most, for its callers to be read


def _from_chosen_returns(path: str, function: ast.AST, code: list[ast.AST], own: Reached,
                         sites: CallSites) -> Reached:  # fmt: skip
    """A gate choosing the string its function returns (flashinfer's
    ``determine_gemm_backend``: ``if major == 9 and ...: return "sm90"`` else
    ``"sm80"``) guards what its callers run for that string: each caller, in any file
    of the tree, that binds the call's result to a name (``backend =
    determine_gemm_backend(x.device)``, ``self._backend = ...``) and tests that name
    for the string (``if backend == "sm90":``, in the function or, for an attribute of
    ``self``, in the class's methods) runs that branch's body for it."""
    chosen = {s for c in code if isinstance(c, ast.Return) and c.value is not None
              for s in spread_literals(c.value)}  # fmt: skip
    if not chosen:
        return own
    out = Reached(list(own.calls), list(own.targets))
    for caller_path, call, holder, parents in _calls_to(sites, path, function):
        statement = parents.get(id(call))
        pair = single_assignment(statement) if statement is not None else None
        if holder is None or pair is None or pair[1] is not call:
            continue
        bound = pair[0]
        if isinstance(bound, ast.Name):
            places: list[ast.FunctionDef | ast.AsyncFunctionDef] = [holder]
        elif (isinstance(bound, ast.Attribute) and isinstance(bound.value, ast.Name)
              and bound.value.id == "self"):  # fmt: skip
            places = [holder, *sibling_methods(holder, parents)]
        else:
            continue
        for place in places:
            bodies: list[ast.AST] = [s for n in walk(place) if isinstance(n, ast.If)
                                     and _tests_for(n.test, bound, chosen) for s in n.body]  # fmt: skip
            if bodies:
                frame = Frame(caller_path, sites.follow.function_scope(place), None, id(place))
                where = holder.name if place is holder else f"{holder.name}>{place.name}"
                _join(out, reach(sites.follow, frame, bodies, sites.cap), where)
    return out


def calling_files(ev: PyTree, name: str, leave_out: str = "") -> list[str]:
    """The tree's files (but ``leave_out``) that call something named ``name``; none
    when more than :data:`_MAX_CALLER_FILES` do (a name that common is no lead)."""
    files = [p for p in ev.files_calling(name) if p != leave_out]
    return files if len(files) <= _MAX_CALLER_FILES else []


def _calls_to(sites: CallSites, path: str, function: ast.AST, leave_out: str = "",
              depth: int = 0) -> Iterator[tuple[str, ast.Call, ast.FunctionDef
                                                | ast.AsyncFunctionDef | None,
                                                dict[int, ast.AST]]]:  # fmt: skip
    """The calls of the tree function ``function`` (defined in ``path``) in the files
    naming it (but ``leave_out``), by identity: each with its file, the function it is
    written in (None at module level) and that file's parents.  A function that only
    hands the result back (``return f(...)``) is passed through: its own calls, in any
    file, stand for it (:data:`_MAX_PASSED` deep)."""
    name, line = getattr(function, "name", ""), getattr(function, "lineno", 0)
    if not distinctive(name):
        return
    ev = sites.follow
    for caller_path in calling_files(ev, name):
        calls = sites.calls_in(caller_path)
        if calls is None:
            continue
        parents, by_name = calls
        for call in by_name.get(name, []):
            found = function_of(call, parents)
            holder = found if isinstance(found, ast.FunctionDef | ast.AsyncFunctionDef) else None
            frame = (Frame(caller_path, ev.function_scope(holder), None, id(holder))
                     if holder is not None else Frame(caller_path))  # fmt: skip
            ev.cap = (0, 0)
            if not any(isinstance(v, Func) and (v.path, v.node.lineno) == (path, line)
                       for v in ev.eval(call.func, frame)):  # fmt: skip
                continue
            if holder is not None and passes_on(call, parents) and depth < _MAX_PASSED:
                yield from _calls_to(sites, caller_path, holder, "", depth + 1)
            elif caller_path != leave_out:  # a wrapper there is passed through, all the same
                yield caller_path, call, holder, parents


def _from_other_callers(path: str, node: ast.AST, own: Reached, sites: CallSites,
                        stops: bool) -> Reached:  # fmt: skip
    """A decision function's callers in the tree's other files (sglang's
    ``should_enable_swap_ab()`` in ``fused_moe_triton_kernels.py``, called where the
    kernel is launched), by identity: what each call guards (:func:`_guarded_by`)."""
    out = Reached(list(own.calls), list(own.targets))
    for caller_path, call, holder, parents in _calls_to(sites, path, node, path):
        frame = (Frame(caller_path, sites.follow.function_scope(holder), None, id(holder))
                 if holder is not None else Frame(caller_path))  # fmt: skip
        more = reach(sites.follow, frame, _guarded_by(call, parents, stops), sites.cap)
        _join(out, more, f"{caller_path}:{getattr(holder, 'name', '<module>')}")
    return out


def _join(out: Reached, more: Reached, prefix: str = "") -> None:
    """Add what ``more`` reached to ``out``, its calls under ``prefix`` (``prefix>call``)."""
    calls = [f"{prefix}>{c}" if prefix else c for c in more.calls]
    out.calls += [c for c in calls if c not in out.calls]
    out.targets += [t for t in more.targets if t not in out.targets]


def _tests_for(test: ast.expr, bound: ast.expr, chosen: set[str]) -> bool:
    """Whether ``test`` asks the bound name (a local or ``self.attr``) to be one of the
    ``chosen`` strings."""
    if not chosen & set(tested_names(test)):
        return False
    want = ast.dump(bound, annotate_fields=False).replace("Store()", "Load()")
    return any(ast.dump(n, annotate_fields=False) == want for n in walk(test))


def named_backends(test: ast.expr) -> list[ast.Constant]:
    """The backend names ``test`` asks a value to be (:func:`tested_names`), as literals
    to follow: only a compound name (``"trtllm_mha"``, ``"fa4"``); a plain word
    (``"triton"``, ``"flashinfer"``) names one backend in each of several registries
    (``--mamba-backend triton`` is not the attention backend ``"triton"``)."""
    return [ast.Constant(name) for name in dict.fromkeys(tested_names(test))
            if any(c in name for c in "_-") or any(c.isdigit() for c in name)]


def tested_names(test: ast.expr) -> Iterator[str]:
    """The strings ``test`` asks a value to be, in the terms that must all hold
    (``x == "a"``, ``x in ("a", "b")``, joined by ``and``), not those it asks it not to be."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        for value in test.values:
            yield from tested_names(value)
    elif isinstance(test, ast.BoolOp):  # `a == "x" or b == "x"`: what every term asks
        first, *rest = (list(tested_names(v)) for v in test.values)
        yield from (name for name in first if all(name in other for other in rest))
    elif isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq | ast.In):
        for side in (test.left, test.comparators[0]):
            items = side.elts if isinstance(side, ast.Tuple | ast.List | ast.Set) else [side]
            yield from (i.value for i in items
                        if isinstance(i, ast.Constant) and isinstance(i.value, str))  # fmt: skip


class CallSites:
    """The calls of one file by callee name, each with the function it is written in
    (its innermost one): built once, on the first decision function of the file."""

    def __init__(self, found: Scan, follow: PyTree, cap: Cap | None = None) -> None:
        self.found, self.follow, self.cap = found, follow, cap
        self._by_name: dict[str, list[tuple[str, ast.Call]]] | None = None
        self._registered: dict[str, list[tuple[str, Key | None]]] | None = None
        self._stops: dict[int, bool] = {}  # per function of the file: may_stop

    def may_stop(self, function: ast.AST | None) -> bool:
        """:func:`may_stop`, read once per function (a function holds many gates)."""
        key = id(function)
        if key not in self._stops:
            self._stops[key] = may_stop(function)
        return self._stops[key]

    def calls_in(self, path: str) -> _Calls | None:
        """Another file's parents and its calls by the name called (kept with the tree)."""
        return self.follow.call_sites(path)

    def registered(self, function: str) -> list[tuple[str, Key | None]]:
        """The functions of the file whose decorators are handed ``function`` (a top-level
        one) as a value, each with the registry key it is handed under, if any."""
        if self._registered is None:
            self._registered = {}
            for decorated, node in self.found.functions.items():
                for value in decorator_arguments(node):
                    for name, key in handed(value):
                        self._registered.setdefault(name, []).append((decorated, key))
        return self._registered.get(function, [])

    def of(self, node: ast.AST, parents: dict[int, ast.AST], depth: int = 0,
           after: bool = True) -> Iterator[tuple[str, list[ast.AST]]]:  # fmt: skip
        """Each function of the file that calls ``node``, and the code that call guards
        (``after``: what runs after it too; see :func:`_guarded_by`); a caller that only
        hands the result back (``return f(...)``) is passed through to its own callers
        (:data:`_MAX_PASSED` deep)."""
        if self._by_name is None:
            self._by_name = {}
            for caller, body in self.found.functions.items():
                marks = [c for d in getattr(body, "decorator_list", []) for c in walk(d)
                         if isinstance(c, ast.Call)]  # `@skipif(not f())`: guards the body
                for call in [*_own_calls(body), *marks]:
                    if isinstance(call.func, ast.Name):
                        self._by_name.setdefault(call.func.id, []).append((caller, call))
        for caller, call in self._by_name.get(getattr(node, "name", ""), []):
            if not _resolves_to(self.found, self.follow, caller, call, node):
                continue
            outer = self.found.functions.get(caller)
            if passes_on(call, parents) and outer is not None and depth < _MAX_PASSED:
                # `return _resolve_backend(...)`: its own callers run what it decides
                yield from ((f"{caller}>{c}", code) for c, code in
                            self.of(outer, parents, depth + 1, after))  # fmt: skip
            else:
                yield caller, _guarded_by(call, parents, after)


_MAX_PASSED = 2  # callers handing a result back, followed to their own callers


def _own_calls(function: ast.AST) -> Iterator[ast.Call]:
    """The calls in a function's body, not in the functions or classes nested in it."""
    return (n for n in own_nodes(function) if isinstance(n, ast.Call))


def _resolves_to(found: Scan, follow: PyTree, caller: str, call: ast.Call, node: ast.AST) -> bool:
    frame = found.frames.get(caller, found.frames["<module>"])
    follow.cap = (0, 0)
    line, name = getattr(node, "lineno", 0), getattr(node, "name", "")
    return any(isinstance(v, Func) and v.path == frame.path and v.node.lineno == line
               and v.node.name == name for v in follow.eval(call.func, frame))  # fmt: skip


def _guarded_by(call: ast.Call, parents: dict[int, ast.AST], after: bool = True) -> list[ast.AST]:
    """What a call of a decision function decides: the branch of the ``if`` it tests
    (the else when it is negated), else the statements that run after it in its
    function; not those when its value is dropped (``initialize_fp4_gemm_config(args)``
    on a line of its own) and the call returns whatever the gate decides (``after``
    false: the gate picks a value, it refuses nothing)."""
    child: ast.AST = call
    parent = parents.get(id(call))
    negated = False
    while parent is not None and not isinstance(parent, ast.stmt):
        negated ^= isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not)
        child, parent = parent, parents.get(id(parent))
    if isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef) and child in parent.decorator_list:
        return list(parent.body)
    if isinstance(parent, ast.If | ast.While) and parent.test is child:
        return list(parent.orelse if negated else parent.body)
    # the statements that run after it: the rest of its block, then of the blocks
    # around it (`if use_cp: _skip_if_cp_unsupported()`, then the test's kernel calls)
    if not after and isinstance(parent, ast.Expr) and parent.value is child:
        return []
    return runs_after(parent, parents) if isinstance(parent, ast.stmt) else []


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


__all__ = ["CAPABILITY", "JIT", "PREDICATE", "RUNTIME", "collector_paused", "gates_of_file",
           "says_intentional"]
