"""Where a function is called, and what each call decides.

A gate in a decision function guards what its callers run: the branch an ``if`` on
the call takes, or, when the call may stop (it raises, skips, exits), what runs after
it.  Callers are found in the gate's own file (:class:`CallSites`, built once per
file) and in the tree's other files (:func:`calls_to`), each resolved by identity
through the arch evaluator, never by name alone.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from contrib.analysis.archvalues import Cap, Frame, Func
from contrib.analysis.gates import (
    Scan,
)
from contrib.analysis.pywalk import own_nodes, passes_on, walk
from contrib.analysis.reach.backends import (
    Key,
    decorator_arguments,
    handed,
)
from contrib.analysis.reach.names import distinctive
from contrib.analysis.reach.tree import CallSites as _Calls
from contrib.analysis.reach.tree import PyTree
from contrib.analysis.refusal import may_stop
from contrib.audit.finding.code import function_of, runs_after

_MAX_CALLER_FILES = 12  # files calling one function, at most, for its callers to be read


def calling_files(ev: PyTree, name: str, leave_out: str = "") -> list[str]:
    """The tree's files (but ``leave_out``) that call something named ``name``; none
    when more than :data:`_MAX_CALLER_FILES` do (a name that common is no lead)."""
    files = [p for p in ev.files_calling(name) if p != leave_out]
    return files if len(files) <= _MAX_CALLER_FILES else []


def calls_to(sites: CallSites, path: str, function: ast.AST, leave_out: str = "",
              depth: int = 0) -> Iterator[tuple[str, ast.Call, ast.FunctionDef
                                                | ast.AsyncFunctionDef | None,
                                                dict[int, ast.AST]]]:
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
                     if holder is not None else Frame(caller_path))
            ev.cap = (0, 0)
            if not any(isinstance(v, Func) and (v.path, v.node.lineno) == (path, line)
                       for v in ev.eval(call.func, frame)):
                continue
            if holder is not None and passes_on(call, parents) and depth < _MAX_PASSED:
                yield from calls_to(sites, caller_path, holder, "", depth + 1)
            elif caller_path != leave_out:  # a wrapper there is passed through, all the same
                yield caller_path, call, holder, parents


def tests_for(test: ast.expr, bound: ast.expr, chosen: set[str]) -> bool:
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
                        if isinstance(i, ast.Constant) and isinstance(i.value, str))


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
           after: bool = True) -> Iterator[tuple[str, list[ast.AST]]]:
        """Each function of the file that calls ``node``, and the code that call guards
        (``after``: what runs after it too; see :func:`guarded_by`); a caller that only
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
                            self.of(outer, parents, depth + 1, after))
            else:
                yield caller, guarded_by(call, parents, after)


_MAX_PASSED = 2  # callers handing a result back, followed to their own callers


def _own_calls(function: ast.AST) -> Iterator[ast.Call]:
    """The calls in a function's body, not in the functions or classes nested in it."""
    return (n for n in own_nodes(function) if isinstance(n, ast.Call))


def _resolves_to(found: Scan, follow: PyTree, caller: str, call: ast.Call, node: ast.AST) -> bool:
    frame = found.frames.get(caller, found.frames["<module>"])
    follow.cap = (0, 0)
    line, name = getattr(node, "lineno", 0), getattr(node, "name", "")
    return any(isinstance(v, Func) and v.path == frame.path and v.node.lineno == line
               and v.node.name == name for v in follow.eval(call.func, frame))


def guarded_by(call: ast.Call, parents: dict[int, ast.AST], after: bool = True) -> list[ast.AST]:
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
