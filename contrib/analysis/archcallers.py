"""What the callers of a module's private helper pass it, for one of its parameters.

flashinfer's ``_cp_delta_rule_rejection_reason(arch_major, ...)`` tests
``arch_major``: a helper's parameter decides with the GPU when its callers pass a
value that does (``..._rejection_reason(arch_major=major)``).  A private function at a
module's top level, undecorated and never read other than as the callee of a
plain call in that module, is called only there, so its callers are all known:
each one's argument (or the default it leaves in place) is what the parameter
holds.  The evaluator follows them one hop (:class:`contrib.analysis.archeval.TreeEval`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from contrib.analysis.archtouch import Modules
from contrib.analysis.archvalues import Frame
from contrib.analysis.pymodules import Binding, Scope

FunctionScope = Callable[[ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda], Scope]


class Callers:
    """The arguments a tree's private helpers are passed, by their callers (kept)."""

    def __init__(self, modules: Modules, function_scope: FunctionScope) -> None:
        self.modules, self.function_scope = modules, function_scope
        self._passed: dict[tuple[int, str], list[tuple[ast.expr, Frame]]] = {}
        self._calls: dict[str, tuple[dict[str, list[tuple[ast.Call, Any]]], set[str]]] = {}

    def passed(self, binding: Binding, path: str) -> list[tuple[ast.expr, Frame]]:
        """What the callers of a module's private helper pass for one of its parameters
        (``_rejection_reason(arch_major=_arch_major, ...)``), each with the frame it is
        read in; empty when the callers are not all known.  A private function (``_x``,
        not ``__x__``) at a module's top level, undecorated and never read other than
        as the callee of a plain call in that module, is called only there; a caller
        leaving the parameter out passes its default."""
        func = binding.node
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            return []
        key = (id(func), binding.attr)
        found = self._passed.get(key)
        if found is None:
            found = self._passed[key] = self._find_passed(func, binding.attr, path)
        return found

    def _find_passed(self, func: ast.FunctionDef | ast.AsyncFunctionDef, name: str,
                     path: str) -> list[tuple[ast.expr, Frame]]:
        module = self.modules(path)
        if (module is None or not func.name.startswith("_") or func.name.startswith("__")
                or func.decorator_list or not any(s is func for s in module[0].body)):
            return []
        calls, escaped = self._module_calls(path, module[0])
        sites = calls.get(func.name, [])
        if not sites or func.name in escaped or len(module[1].names.get(func.name, [])) != 1:
            return []
        spec = func.args
        positional = [a.arg for a in (*spec.posonlyargs, *spec.args)]
        defaults = dict(zip(reversed(positional), reversed(spec.defaults), strict=False))
        defaults |= {a.arg: d for a, d in zip(spec.kwonlyargs, spec.kw_defaults, strict=True)
                     if d is not None}
        if name not in positional and name not in defaults and name not in {
                a.arg for a in spec.kwonlyargs}:
            return []  # *args, **kwargs
        out: list[tuple[ast.expr, Frame]] = []
        for call, owner in sites:
            if any(isinstance(a, ast.Starred) for a in call.args) or any(
                    k.arg is None for k in call.keywords):
                return []
            given = next((k.value for k in call.keywords if k.arg == name), None)
            if given is None and name in positional and positional.index(name) < len(call.args):
                given = call.args[positional.index(name)]
            if given is None:
                if name not in defaults:
                    return []
                out.append((defaults[name], Frame(path)))
                continue
            out.append((given, Frame(path) if owner is None else
                        Frame(path, self.function_scope(owner), None, id(owner))))
        return out

    def _module_calls(self, path: str, module: ast.Module
                      ) -> tuple[dict[str, list[tuple[ast.Call, Any]]], set[str]]:
        """A module's plain calls by callee name, each with the function around it (None
        at the top level), and the names it reads other than as such a callee."""
        found = self._calls.get(path)
        if found is not None:
            return found
        calls: dict[str, list[tuple[ast.Call, Any]]] = {}
        escaped: set[str] = set()
        callees: set[int] = set()
        stack: list[tuple[ast.AST, Any]] = [(module, None)]
        while stack:
            node, owner = stack.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.Call) and isinstance(child.func, ast.Name):
                    calls.setdefault(child.func.id, []).append((child, owner))
                    callees.add(id(child.func))
                elif (isinstance(child, ast.Name) and id(child) not in callees
                      and not isinstance(child.ctx, ast.Store)):
                    escaped.add(child.id)
                inner = child if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef |
                                            ast.Lambda) else owner
                stack.append((child, inner))
        found = self._calls[path] = (calls, escaped)
        return found
