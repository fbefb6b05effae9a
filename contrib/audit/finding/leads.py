"""Where to look for what an excluding gate keeps from the target, when its own code
reaches nothing: the leads, tried in a fixed order.

A gate's class comes from what stands behind it (:mod:`contrib.audit.classing`).  The
first reading is the gate's own code (the branch it guards, what runs after its
refusal).  When that reaches no kernel, module or op, :data:`LEADS` are tried in
order, and the first that finds something speaks for the gate:

1. **its callers**: a decision function (``_skip_if_unsupported()``, ``def
   _use_fused(): return is_sm100()``) guards what its callers run, in its own file;
2. **its callers elsewhere**: the same, in the tree's other files, found by identity;
3. **registrations**: a check handed to another function's decorator
   (``@backend_requirement({"cutlass": _cutlass_requirement})``) guards that function;
4. **the object's methods**: a refusal of ``__init__``, or of a method that checks the
   object and returns nothing (``_check_support()``), guards every method of the object;
5. **the configuration**: a refusal in ``__init__`` under a backend's test guards the
   methods' branches under the same test (not tried after 4);
6. **the backends its test names** (``if backend == "trtllm_mha" and not sm100:``);
7. **the backends of the branch it sits in** (``if backend == "trtllm_mla": ...``);
8. **the strings its function returns**, followed to what callers run for them;
9. **checks only**: the guarded code only asserts, raises and logs: no kernel at all.

The order is the design, and these assumptions make it one (none is strictly true;
a gate a lead misreads is one the history benchmark shows):

1. what a gate's own code reaches speaks for it before anything around it does;
2. a function's callers run what it decides: nearer code (its own file) first,
   because a name resolved by identity there is cheaper and less often ambiguous;
3. a function handed to a decorator or constructed as an object has no caller to
   read: the decorated function, or the object's methods, are its callers;
4. a backend named in a test is what the test is about;
5. code that only checks is gate-only only when nothing else was found: a check
   before a kernel call is not the whole of what the gate guards.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from contrib.analysis.archeval import TreeEval
from contrib.analysis.archvalues import Frame
from contrib.analysis.gates import (
    DECORATOR,
    Gate,
    Scan,
)
from contrib.analysis.pywalk import single_assignment, walk
from contrib.analysis.reach.backends import (
    spread_literals,
)
from contrib.analysis.reach.endpoints import CHECKS, Endpoint
from contrib.analysis.reach.objects import classes_named, lookup
from contrib.analysis.reach.walk import Reached, reach
from contrib.audit.finding.effect import Effect
from contrib.audit.finding.sites import CallSites, calls_to, guarded_by, named_backends, tests_for

_LOG_CALLS = frozenset({"debug", "info", "warning", "warn", "warning_once", "info_once",
                        "error", "critical", "print"})


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
                      or isinstance(statement.value, ast.Call) and _logs(statement.value))):
            return False
    return True


def _logs(call: ast.Call) -> bool:
    func = call.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(
        func, ast.Attribute) else ""
    return name in _LOG_CALLS and not any(isinstance(n, ast.Call) for a in call.args
                                          for n in walk(a))


def _decides(function: str) -> bool:
    """Whether a function may be a decision function: no test, no method (a method's
    callers are an object's, found through the object)."""
    return "." not in function and not function.startswith("test") and function != "<module>"


def _from_callers(found: Scan, function: str, parents: dict[int, ast.AST],
                  own: Reached, sites: CallSites, stops: bool) -> Reached:
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
    out = Reached(list(own.calls), list(own.endpoints))
    for caller, code in sites.of(node, parents, after=stops):
        frame = found.frames.get(caller, found.frames["<module>"])
        _join(out, reach(sites.follow, frame, code, sites.cap), (caller,))
    return out


def _from_other_callers(path: str, node: ast.AST, own: Reached, sites: CallSites,
                        stops: bool) -> Reached:
    """A decision function's callers in the tree's other files (sglang's
    ``should_enable_swap_ab()`` in ``fused_moe_triton_kernels.py``, called where the
    kernel is launched), by identity: what each call guards (:func:`guarded_by`)."""
    out = Reached(list(own.calls), list(own.endpoints))
    for caller_path, call, holder, parents in calls_to(sites, path, node, path):
        frame = (Frame(caller_path, sites.follow.function_scope(holder), None, id(holder))
                 if holder is not None else Frame(caller_path))
        more = reach(sites.follow, frame, guarded_by(call, parents, stops), sites.cap)
        _join(out, more, (f"{caller_path}:{getattr(holder, 'name', '<module>')}",))
    return out


def _from_registrations(found: Scan, function: str, own: Reached, sites: CallSites) -> Reached:
    """A check handed to the decorator of another function of its file guards that
    function: flashinfer's ``@backend_requirement({"cutlass": _cutlass_requirement},
    common_check=_check_problem_size)`` on ``mm_bf16``.  Under a backend's name it
    guards what the function runs for that backend (tests of the registry's names
    decided by it); as a plain argument, the whole function."""
    out = Reached(list(own.calls), list(own.endpoints))
    for decorated, key in sites.registered(function):
        node = sites.found.functions.get(decorated)
        frame = found.frames.get(decorated, found.frames["<module>"])
        _join(out, reach(sites.follow, frame, list(getattr(node, "body", [])), sites.cap, key),
              (decorated,))
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
               and n.lineno <= line <= (n.end_lineno or n.lineno)]
    return bool(holding) and max(holding, key=lambda n: n.lineno) in function.body


def checks_object(ev: TreeEval, path: str, function: ast.AST | None,
                  parents: dict[int, ast.AST], refuses: bool) -> bool:
    """Whether a refusing gate sits in a method that checks its object, returns
    nothing and overrides a method of a tree base: flashinfer's
    ``TrtllmFp4RoutedRunner._check_support()``, which the base class's
    ``check_support()`` calls on ``self`` before anything is built or run.  Such a
    method has no caller of its own to read (the call is the base class's, on whatever
    subclass is made): what the object's other methods run stands behind it, as
    behind a refusal in ``__init__`` (:func:`refuses_making`).  A method no base
    defines is called by name in its own class (sglang's ``ServerArgs._handle_*``
    checks, called from ``__post_init__``): its callers are the lead, not the object."""
    owner = parents.get(id(function)) if function is not None else None
    if not refuses or not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef) \
            or function.name in _MAKES or not isinstance(owner, ast.ClassDef):
        return False
    if not any(lookup(ev, base_path, base, function.name)
               for node in owner.bases for base_path, base in classes_named(ev, node, Frame(path))):
        return False
    todo: list[ast.AST] = list(function.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue  # a nested definition's returns are its own
        if isinstance(node, ast.Return) and node.value is not None and not (
                isinstance(node.value, ast.Constant) and node.value.value is None):
            return False  # it returns a value: its callers read it (a decision, not a check)
        todo += ast.iter_child_nodes(node)
    return True


def sibling_methods(init: ast.AST | None, parents: dict[int, ast.AST]
                    ) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The other methods of the class whose method is ``init`` (its ``__init__``, or a
    check of the object): what the object it makes runs."""
    owner = parents.get(id(init)) if init is not None else None
    if not isinstance(owner, ast.ClassDef):
        return []
    return [n for n in owner.body
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n is not init]


def _from_methods(found: Scan, function: ast.AST | None, parents: dict[int, ast.AST],
                  own: Reached, sites: CallSites) -> Reached:
    """A gate refusing in a class's ``__init__`` (flashinfer's
    ``@supported_compute_capability([100, 103])`` on ``CuteDslMoEWrapper.__init__``), or
    in a method checking the object (:func:`checks_object`), guards every method of
    the object it would make: what those run stands behind it."""
    out = Reached(list(own.calls), list(own.endpoints))
    for method in sibling_methods(function, parents):
        path = found.frames["<module>"].path
        frame = Frame(path, sites.follow.function_scope(method), None, id(method))
        _join(out, reach(sites.follow, frame, list(method.body), sites.cap), (method.name,))
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
                        sites: CallSites) -> Reached:
    """A refusal in ``__init__`` under a configuration (sglang's ``Fp8MoEMethod``: ``if
    get_moe_runner_backend().is_cutlass(): assert is_sm100_supported() or
    is_sm90_supported()``) guards what the object's other methods run under the same
    test (``apply``'s ``if get_moe_runner_backend().is_cutlass(): cutlass_fused_experts_fp8(...)``):
    the object made in that configuration runs those branches."""
    tests = {ast.dump(t) for t in configuration_tests(init, line)}
    if not tests:
        return own
    out = Reached(list(own.calls), list(own.endpoints))
    path = found.frames["<module>"].path
    for method in sibling_methods(init, parents):
        branches = [n.body for n in walk(method) if isinstance(n, ast.If)
                    and ast.dump(n.test) in tests]
        if not branches:
            continue
        frame = Frame(path, sites.follow.function_scope(method), None, id(method))
        _join(out, reach(sites.follow, frame, [s for body in branches for s in body], sites.cap),
              (method.name,))
    return out


def _from_named_backends(test: ast.expr, frame: Frame, own: Reached, sites: CallSites) -> Reached:
    """A gate whose test also names a backend (sglang's ``if prefill_backend ==
    "trtllm_mha" and not is_sm100_supported(): raise``) turns the target away from that
    backend: what the tree registers under the name stands behind it, as when the name
    is handed on (:func:`named_backends`)."""
    named = named_backends(test)
    if not named:
        return own
    out = Reached(list(own.calls), list(own.endpoints))
    _join(out, reach(sites.follow, frame, list(named), sites.cap))
    return out


def _from_chosen_returns(path: str, function: ast.AST, code: list[ast.AST], own: Reached,
                         sites: CallSites) -> Reached:
    """A gate choosing the string its function returns (flashinfer's
    ``determine_gemm_backend``: ``if major == 9 and ...: return "sm90"`` else
    ``"sm80"``) guards what its callers run for that string: each caller, in any file
    of the tree, that binds the call's result to a name (``backend =
    determine_gemm_backend(x.device)``, ``self._backend = ...``) and tests that name
    for the string (``if backend == "sm90":``, in the function or, for an attribute of
    ``self``, in the class's methods) runs that branch's body for it."""
    chosen = {s for c in code if isinstance(c, ast.Return) and c.value is not None
              for s in spread_literals(c.value)}
    if not chosen:
        return own
    out = Reached(list(own.calls), list(own.endpoints))
    for caller_path, call, holder, parents in calls_to(sites, path, function):
        statement = parents.get(id(call))
        pair = single_assignment(statement) if statement is not None else None
        if holder is None or pair is None or pair[1] is not call:
            continue
        bound = pair[0]
        if isinstance(bound, ast.Name):
            places: list[ast.FunctionDef | ast.AsyncFunctionDef] = [holder]
        elif (isinstance(bound, ast.Attribute) and isinstance(bound.value, ast.Name)
              and bound.value.id == "self"):
            places = [holder, *sibling_methods(holder, parents)]
        else:
            continue
        for place in places:
            bodies: list[ast.AST] = [s for n in walk(place) if isinstance(n, ast.If)
                                     and tests_for(n.test, bound, chosen) for s in n.body]
            if bodies:
                frame = Frame(caller_path, sites.follow.function_scope(place), None, id(place))
                where = (holder.name,) if place is holder else (holder.name, place.name)
                _join(out, reach(sites.follow, frame, bodies, sites.cap), where)
    return out


def _join(out: Reached, more: Reached, prefix: tuple[str, ...] = ()) -> None:
    """Add what ``more`` reached to ``out``, its calls under ``prefix`` (``(*prefix, *call)``)."""
    calls = [(*prefix, *c) for c in more.calls]
    out.calls += [c for c in calls if c not in out.calls]
    out.endpoints += [t for t in more.endpoints if t not in out.endpoints]


@dataclass(frozen=True)
class Gated:
    """An excluding gate as the leads read it: the file's scan, the gate, the function
    holding it (None at module level) and that function's frame, its effect, the
    backend's branch it sits in (if any), and the file's call sites."""

    found: Scan
    gate: Gate
    function: ast.AST | None
    parents: dict[int, ast.AST]
    frame: Frame
    effect: Effect
    configured: ast.If | None
    sites: CallSites

    @property
    def stops(self) -> bool:
        """Whether a call of its function may not return (what follows is behind it)."""
        return self.effect.kind.stops or self.sites.may_stop(self.function)


class Lead(Protocol):
    """One lead: what ``gated`` keeps from the target, added to ``behind``."""

    def __call__(self, gated: Gated, behind: Reached, /) -> Reached: ...


def _callers(g: Gated, behind: Reached) -> Reached:
    return _from_callers(g.found, g.gate.function, g.parents, behind, g.sites, g.stops)


def _other_callers(g: Gated, behind: Reached) -> Reached:
    if g.function is None or not _decides(g.gate.function):
        return behind
    return _from_other_callers(g.gate.file, g.function, behind, g.sites, g.stops)


def _registrations(g: Gated, behind: Reached) -> Reached:
    return _from_registrations(g.found, g.gate.function, behind, g.sites)


def _methods(g: Gated, behind: Reached) -> Reached:
    if not (refuses_making(g.function, g.gate.line, g.gate.kind)
            or checks_object(g.sites.follow, g.gate.file, g.function, g.parents,
                             g.effect.kind.stops)):
        return behind
    return _from_methods(g.found, g.function, g.parents, behind, g.sites)


def _configuration(g: Gated, behind: Reached) -> Reached:
    if refuses_making(g.function, g.gate.line, g.gate.kind):
        return behind  # the object's methods were the lead
    return _from_configuration(g.found, g.function, g.gate.line, g.parents, behind, g.sites)


def _tested_backends(g: Gated, behind: Reached) -> Reached:
    if g.gate.node is None:
        return behind
    return _from_named_backends(g.gate.node, g.frame, behind, g.sites)


def _configured_backends(g: Gated, behind: Reached) -> Reached:
    if g.configured is None:
        return behind
    return _from_named_backends(g.configured.test, g.frame, behind, g.sites)


def _chosen_returns(g: Gated, behind: Reached) -> Reached:
    if g.function is None:
        return behind
    return _from_chosen_returns(g.gate.file, g.function, list(g.effect.code), behind, g.sites)


def _checks(g: Gated, behind: Reached) -> Reached:
    if not only_checks(g.effect.code):
        return behind
    return Reached(behind.calls, [Endpoint(CHECKS, g.gate.file, g.gate.function)])


LEADS: tuple[tuple[str, Lead], ...] = (
    ("its callers", _callers),
    ("its callers in other files", _other_callers),
    ("registrations", _registrations),
    ("the object's methods", _methods),
    ("the configuration", _configuration),
    ("the backends its test names", _tested_backends),
    ("the backends of its branch", _configured_backends),
    ("the strings its function returns", _chosen_returns),
    ("checks only", _checks),
)


def follow_leads(gated: Gated, behind: Reached) -> Reached:
    """What the first lead of :data:`LEADS` that finds anything finds (``behind`` when
    none does)."""
    for _, lead in LEADS:
        if behind.endpoints:
            break
        behind = lead(gated, behind)
    return behind
