"""A function body run on one capability: what it may return.

The arch evaluator reads a helper such as sglang's ``_check_cuda_device_version``
(``if not is_cuda(): return False`` then ``return cap[0] in majors and ...``)
statement by statement: assignments update the names, an ``if`` whose test the
GPU decides takes its branch, one the GPU does not decide takes both, ``raise``
ends a path, and every ``return`` adds its values.  Loops run their body once
or not at all, with the names they assign unknown; each block of a ``try`` runs
once or not at all.  Asked about a machine where the toolkit works (a JIT build's,
see :class:`~contrib.analysis.archeval.TreeEval`), a ``try`` body runs, and its
handlers run only from a ``raise`` of the tree's own in it: flashinfer's
``_normalize_cuda_arch`` returns ``"0f"`` from its ``try`` at CUDA 13, not also the
``"0a"`` after it.
"""

from __future__ import annotations

import ast
from typing import Any, Protocol

from contrib.analysis.archvalues import ANY, UNK, Frame, Func, Values, index, truth_of, values_of
from contrib.analysis.pymodules import Binding, bound_names, targets_of

_STEPS = 400  # statements run per call before its result is unknown
Env = dict[str, Values]


class Evaluator(Protocol):
    """What the runner needs of :class:`contrib.analysis.archeval.TreeEval`."""

    working: bool  # a machine where the toolkit works: a `try` body runs

    def eval(self, node: ast.expr, frame: Frame) -> Values: ...

    def imported(self, binding: Binding, importer: str) -> Values: ...


class _Run:
    def __init__(self, ev: Evaluator, frame: Frame, watch: dict[int, list[Env]] | None = None
                 ) -> None:
        self.ev, self.frame = ev, frame
        self.returns: set[Any] = set()
        self.steps = 0
        self.watch = watch if watch is not None else {}
        self.catching: list[list[Env]] = []  # the names at each `raise` of a try's body

    def value(self, node: ast.expr, env: Env) -> Values:
        return self.ev.eval(node, Frame(self.frame.path, self.frame.local, env, self.frame.key))

    def block(self, statements: list[ast.stmt], env: Env | None) -> Env | None:
        for statement in statements:
            if env is None:
                return None
            self.steps += 1
            if self.steps > _STEPS:
                self.returns.add(UNK)
                return None
            if id(statement) in self.watch:
                self.watch[id(statement)].append(dict(env))
            env = self.statement(statement, env)
        return env

    def statement(self, node: ast.stmt, env: Env) -> Env | None:
        if isinstance(node, ast.Return):
            self.returns |= self.value(node.value, env) if node.value else {None}
            return None
        if isinstance(node, ast.Raise):
            if self.catching:
                self.catching[-1].append(env)
            return None
        if isinstance(node, ast.If):
            truth = truth_of(self.value(node.test, env))
            taken = self.block(node.body, dict(env)) if True in truth else None
            other = self.block(node.orelse, dict(env)) if False in truth else None
            return _join(taken, other)
        if isinstance(node, ast.Assign | ast.AnnAssign):
            return self.assign(node, env)
        if isinstance(node, ast.For | ast.AsyncFor | ast.While | ast.Try | ast.TryStar
                      | ast.With | ast.AsyncWith | ast.Match | ast.AugAssign):
            return self.compound(node, env)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            env[node.name] = frozenset({Func(self.frame.path, node)})
        elif isinstance(node, ast.Import | ast.ImportFrom):
            self.imports(node, env)
        return env

    def assign(self, node: ast.Assign | ast.AnnAssign, env: Env) -> Env:
        if node.value is None:
            return env
        values = self.value(node.value, env)
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            for name, where in targets_of(target):
                picked = values
                for n in where:
                    picked = values_of(index(v, n) if n >= 0 else UNK for v in picked)
                env[name] = picked
        return env

    def compound(self, node: ast.stmt, env: Env) -> Env | None:
        """Loops, ``try``, ``with``, ``match``: each block may run or not (once).  A loop
        may run its body again on what it bound, so those names are unknown (a
        ``match``'s too: its patterns bind names no statement does); a ``try`` runs
        each block once at most, so a name it binds holds what it held before or what
        a block bound (sglang's ``get_device_capability`` binds ``major`` in a ``try``
        of its HPU branch: still the GPU's major, or None)."""
        if isinstance(node, ast.Try | ast.TryStar) and self.ev.working:
            return self.attempt(node, env)
        if isinstance(node, ast.Try | ast.TryStar):
            # a handler may run after the body stopped between two bindings of a name
            seen: set[str] = set()
            for statement in node.body:
                names = bound_names(statement)
                for name in names & seen:
                    env[name] = ANY
                seen |= names
        else:
            for name in bound_names(node):
                env[name] = ANY
        blocks = [getattr(node, n) for n in ("body", "orelse", "finalbody")
                  if isinstance(getattr(node, n, None), list)]
        blocks += [h.body for h in getattr(node, "handlers", [])]
        blocks += [c.body for c in getattr(node, "cases", [])]
        if isinstance(node, ast.With | ast.AsyncWith):
            return self.block(node.body, env)
        out: Env | None = env
        for block in blocks:
            out = _join(out, self.block(block, dict(env)))
        return out

    def attempt(self, node: ast.Try | ast.TryStar, env: Env) -> Env | None:
        """A ``try`` on a machine where the toolkit works: its body runs, then its
        ``else``; a handler runs from each ``raise`` of the body's own (one with no
        handler goes on to the ``try`` around it); ``finally`` after either."""
        self.catching.append([])
        out = self.block(node.body, dict(env))
        raised = self.catching.pop()
        if out is not None:
            out = self.block(node.orelse, out)
        if node.handlers:
            for state in raised:
                for handler in node.handlers:
                    out = _join(out, self.block(handler.body, dict(state)))
        elif self.catching:
            self.catching[-1] += raised
        return self.block(node.finalbody, out) if out is not None else None

    def imports(self, node: ast.Import | ast.ImportFrom, env: Env) -> None:
        for alias in node.names:
            if isinstance(node, ast.Import):
                name = alias.asname or alias.name.split(".")[0]
                binding = Binding("import", module=alias.name if alias.asname else name)
            elif alias.name == "*":
                continue
            else:
                name = alias.asname or alias.name
                binding = Binding("import", module=node.module or "", attr=alias.name,
                                  level=node.level)
            env[name] = self.ev.imported(binding, self.frame.path)


def _join(one: Env | None, other: Env | None) -> Env | None:
    """The names after two paths meet (None: a path that ended)."""
    if one is None or other is None:
        return one if other is None else other
    joined = dict(one)
    for name, values in other.items():
        joined[name] = values_of(joined.get(name, frozenset()) | values)
    return joined


def run_body(ev: Evaluator, body: list[ast.stmt], frame: Frame,
             watch: dict[int, list[Env]] | None = None) -> Values:
    """What a function body may return with ``frame.env`` bound (None when it falls off).
    ``watch``: statements (by node id) whose names, as each path reaches them, are
    appended to their list (what an expression of that statement is read with)."""
    run = _Run(ev, frame, watch)
    if run.block(body, dict(frame.env or {})) is not None:
        run.returns.add(None)
    return values_of(run.returns)
