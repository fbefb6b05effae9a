"""The value of a Python expression on each GPU architecture, read from the tree.

An upstream decides what runs on a GPU from expressions like
``torch.cuda.get_device_capability()[0] == 10``, ``f"{major}{minor}" in
["100", "103"]``, ``is_sm100_supported()`` or a module-level
``_is_sm100_supported = _is_cuda and is_sm100_supported()``.  Each is evaluated
here once per capability (``(9, 0)``, ``(10, 0)``, ``(12, 0)``...) by following
names to their bindings (:mod:`contrib.analysis.pymodules`), calls to the
functions' own definitions in the tree (parameters bound, branches on unknown
values explored both ways), and imports across the tree's modules.  No
predicate is known by its name: ``is_blackwell_supported`` means what its
definition at that commit says.

A value is a set of possibilities.  What the GPU does not decide (the CUDA
toolkit's version, a server flag) is *unknown*, and a condition over it is
satisfiable either way: ``is_sm100_supported() and cuda >= 12.8`` can be true on
SM100 only.  Results are cached per (expression, capability) and per (function,
arguments, capability), so a module is never walked once per finding.
"""

from __future__ import annotations

import ast
import itertools
import operator
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from contrib.analysis.archrun import run_body
from contrib.analysis.archtouch import SOURCES, Touch
from contrib.analysis.archvalues import (
    ANY,
    BINOPS,
    BUILTINS,
    IDENTITY,
    LIMIT,
    TOOLKIT,
    UNK,
    Cap,
    Ext,
    Frame,
    Func,
    ModRef,
    Partial,
    Props,
    Values,
    compare,
    hashable,
    index,
    safe,
    settled,
    toolkit_in,
    truth_of,
    vague,
    values_of,
)
from contrib.analysis.pymodules import Binding, ModuleIndex, Reader, Scope, scope_of_body
from contrib.analysis.pyparse import parse_python
from contrib.analysis.pywalk import walk

_DEPTH = 24  # nested calls followed
_T = TypeVar("_T")


class TreeEval:
    """The arch evaluator of one tree; modules are parsed on first use and kept."""

    def __init__(self, read: Reader, paths: Iterable[str],
                 trees: dict[str, ast.Module | None] | None = None) -> None:
        """``trees``: the parsed modules by path, shared with other evaluators of the
        same texts (a module is parsed once for all of them)."""
        self.read = read
        self._trees = trees if trees is not None else {}
        self.index = ModuleIndex(paths)
        self.touch = Touch(self.module, self.index)
        self._local_touch: dict[tuple[int, str, bool], bool] = {}
        self._modules: dict[str, tuple[ast.Module, Scope] | None] = {}
        self._scopes: dict[int, Scope] = {}
        self._memo: dict[tuple[Any, ...], tuple[Values, bool]] = {}
        self._free: dict[tuple[Any, ...], Values] = {}  # what no capability changes
        self._busy: set[tuple[Any, ...]] = set()
        self.cap: Cap = (0, 0)
        self.touched = False  # whether the value being read came from the GPU
        self._depth = 0
        # the value being read was cut short (at _DEPTH, or a parameter not followed
        # one hop from its helper): it is not kept for later readers
        self._cut = False
        self._following = False  # reading what a helper's callers pass (one hop only)
        self._passed: dict[tuple[int, str], list[tuple[ast.expr, Frame]]] = {}
        self._calls: dict[str, tuple[dict[str, list[tuple[ast.Call, Any]]], set[str]]] = {}

    # -- modules and scopes --------------------------------------------------

    def add_module(self, path: str, module: ast.Module) -> None:
        """Use an already parsed module (the file being audited)."""
        if self._modules.get(path) is None:
            self._trees.setdefault(path, module)
            self._modules[path] = (module, scope_of_body(module.body))

    def parsed(self, path: str) -> ast.Module | None:
        """The module at ``path`` if it was parsed already (by this evaluator or another
        sharing its ``trees``)."""
        entry = self._modules.get(path)
        if entry is None and self._trees.get(path) is not None:
            entry = self.module(path)
        return entry[0] if entry is not None else None

    def module(self, path: str) -> tuple[ast.Module, Scope] | None:
        """The parsed module at ``path`` and its top-level bindings (None: unreadable)."""
        if path not in self._modules:
            text = self.read(path)
            tree = None  # unreadable: unknown
            if text is not None:
                if path not in self._trees:
                    parsed = parse_python(path, text)
                    self._trees[path] = parsed if isinstance(parsed, ast.Module) else None
                tree = self._trees[path]
            self._modules[path] = None if tree is None else (tree, scope_of_body(tree.body))
        return self._modules[path]

    def function_scope(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> Scope:
        """The bindings of a function's body and parameters (kept)."""
        scope = self._scopes.get(id(node))
        if scope is None:
            body = node.body if isinstance(node.body, list) else []
            scope = self._scopes[id(node)] = scope_of_body(body, node.args, node)
        return scope

    def may_read_gpu(self, node: ast.expr, frame: Frame, nodes: list[ast.AST] | None = None) -> bool:
        """Whether ``node`` can depend on the GPU at all, from its identifiers alone
        (a cheap test before any evaluation: most expressions never ask); ``nodes``:
        its walk when the caller has it already."""
        for inner in walk(node) if nodes is None else nodes:
            if isinstance(inner, ast.Attribute) and inner.attr in SOURCES:
                return True
            if isinstance(inner, ast.Name) and self._name_touches(inner.id, frame):
                return True
        return False

    def _name_touches(self, name: str, frame: Frame) -> bool:
        local = frame.local.names.get(name) if frame.local is not None else None
        if local is None:
            return self.touch.name(name, frame.path)
        key = (frame.key, name, self._following)  # one hop from a helper: its own answer
        if key not in self._local_touch:
            self._local_touch[key] = False  # a name assigned from itself adds nothing
            touches = any(
                self.may_read_gpu(b.node, frame) if b.kind == "expr" and isinstance(b.node, ast.expr)
                else self._param_touches(b, frame.path) if b.kind == "param"
                else b.kind in ("def", "import") and self._binding_touches(b, frame.path)
                for b in local)
            self._local_touch[key] = touches
        return self._local_touch[key]

    def _binding_touches(self, binding: Binding, path: str) -> bool:
        if binding.kind == "def" and binding.node is not None:
            return self.touch.node(path, binding.node)
        return self.touch.binding(binding, path)

    # -- per-capability reading ----------------------------------------------

    def on_caps(self, node: ast.expr, frame: Frame, caps: Iterable[Cap]) -> dict[Cap, Values] | None:
        """The value of ``node`` on each capability; None when the GPU does not decide it."""
        caps = list(caps)
        results: dict[Cap, Values] = {}
        for cap in caps:
            self.cap, self.touched = cap, False
            results[cap] = self.eval(node, frame)
            if not self.touched and cap == caps[0]:
                return None
        return results

    def eval(self, node: ast.expr, frame: Frame) -> Values:
        """The possible values of ``node`` in ``frame`` on the current capability."""
        if frame.env is not None:
            return self._eval(node, frame)
        key = ("e", id(node), frame.key, self.cap)
        return self._cached(key, lambda: self._eval(node, frame))

    def _cached(self, key: tuple[Any, ...], compute: Callable[[], Values]) -> Values:
        """``key`` ends with the capability; a value computed without reading the GPU
        is the same on every capability, so it is kept once for all of them (a gate is
        read on a dozen capabilities, and most of what it names never asks)."""
        hit = self._memo.get(key)
        if hit is not None:
            self.touched |= hit[1]
            return hit[0]
        free = self._free.get(key[:-1])
        if free is not None:
            return free
        if key in self._busy:
            return ANY
        if self._depth > _DEPTH:
            self._cut = True
            return ANY
        before, self.touched = self.touched, False
        cut_before, self._cut = self._cut, False
        self._busy.add(key)
        self._depth += 1
        try:
            value = compute()
        finally:
            self._busy.discard(key)
            self._depth -= 1
        if not self._cut:  # a value cut short by the depth is not what the name holds
            self._memo[key] = (value, self.touched)
            if not self.touched:
                self._free[key[:-1]] = value
        self.touched |= before
        self._cut |= cut_before
        return value

    def _eval(self, node: ast.expr, frame: Frame) -> Values:
        method = getattr(self, "_e_" + type(node).__name__, None)
        return method(node, frame) if method is not None else ANY

    def _e_Constant(self, node: ast.Constant, frame: Frame) -> Values:
        return frozenset({node.value}) if hashable(node.value) else ANY

    def _e_Name(self, node: ast.Name, frame: Frame) -> Values:
        return self.lookup(node.id, frame, node.lineno)

    def _e_NamedExpr(self, node: ast.NamedExpr, frame: Frame) -> Values:
        return self.eval(node.value, frame)

    def _e_Tuple(self, node: ast.Tuple | ast.List | ast.Set, frame: Frame) -> Values:
        if any(isinstance(e, ast.Starred) for e in node.elts) or len(node.elts) > 64:
            return ANY
        parts = [self.eval(e, frame) for e in node.elts]
        if any(len(p) > 1 for p in parts):
            size = 1
            for p in parts:
                size *= len(p)
            if size > LIMIT:
                return frozenset({tuple(UNK if len(p) > 1 else next(iter(p)) for p in parts)})
        return values_of(tuple(combo) for combo in itertools.product(*parts))

    _e_List = _e_Set = _e_Tuple

    def _e_JoinedStr(self, node: ast.JoinedStr, frame: Frame) -> Values:
        parts: list[Values] = []
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                inner = self.eval(value.value, frame)
                parts.append(values_of(UNK if vague(v) else str(v) for v in inner))
            else:
                parts.append(self.eval(value, frame))
        return values_of(UNK if any(vague(p) for p in combo) else "".join(map(str, combo))
                       for combo in itertools.product(*parts))

    def _e_BoolOp(self, node: ast.BoolOp, frame: Frame) -> Values:
        is_and = isinstance(node.op, ast.And)
        out: set[Any] = set()
        current = self.eval(node.values[0], frame)
        for following in node.values[1:]:
            go_on = False
            for value in current:
                truth = truth_of(frozenset({value}))
                if (not is_and) in truth:  # stops here: this value is the result
                    out.add(settled(value, not is_and))
                if is_and in truth:
                    go_on = True
            if not go_on:
                return values_of(out)
            current = self.eval(following, frame)
        return values_of(out | set(current))

    def _e_UnaryOp(self, node: ast.UnaryOp, frame: Frame) -> Values:
        operand = self.eval(node.operand, frame)
        if isinstance(node.op, ast.Not):
            return frozenset(not t for t in truth_of(operand))
        if isinstance(node.op, ast.USub):
            return values_of(UNK if vague(v) else safe(operator.neg, v) for v in operand)
        return ANY

    def _e_BinOp(self, node: ast.BinOp, frame: Frame) -> Values:
        op = BINOPS.get(type(node.op))
        left, right = self.eval(node.left, frame), self.eval(node.right, frame)
        if op is None:
            return ANY
        return values_of(UNK if vague(a) or vague(b) else safe(op, a, b)
                       for a in left for b in right)

    def _e_Compare(self, node: ast.Compare, frame: Frame) -> Values:
        operands = [self.eval(x, frame) for x in (node.left, *node.comparators)]
        truths: set[bool] = {True}
        for op, left, right in zip(node.ops, operands, operands[1:], strict=False):
            step = set()
            for a, b in itertools.product(left, right):
                step |= compare(op, a, b)
            truths = {x and y for x in truths for y in step}
        return frozenset(truths)

    def _e_IfExp(self, node: ast.IfExp, frame: Frame) -> Values:
        truth = truth_of(self.eval(node.test, frame))
        out: set[Any] = set()
        if True in truth:
            out |= self.eval(node.body, frame)
        if False in truth:
            out |= self.eval(node.orelse, frame)
        return values_of(out)

    def _e_Subscript(self, node: ast.Subscript, frame: Frame) -> Values:
        bases = self.eval(node.value, frame)
        if isinstance(node.slice, ast.Slice):
            lower = self.eval(node.slice.lower, frame) if node.slice.lower else frozenset({None})
            upper = self.eval(node.slice.upper, frame) if node.slice.upper else frozenset({None})
            return values_of(index(b, slice(a, c)) if not (vague(a) or vague(c)) else UNK
                             for b in bases for a in lower for c in upper)
        keys = self.eval(node.slice, frame)
        return values_of(index(b, k) for b in bases for k in keys)

    def _e_Attribute(self, node: ast.Attribute, frame: Frame) -> Values:
        return values_of(v for base in self.eval(node.value, frame)
                       for v in self._attribute(base, node.attr))

    def _attribute(self, base: Any, attr: str) -> Values:
        dotted = f"{base.dotted}.{attr}" if isinstance(base, Ext) else ""
        if base is TOOLKIT or dotted == "torch.version.cuda":
            return frozenset({TOOLKIT})  # its version, `.split`, `.major`: the toolkit still
        if dotted == "torch.version.hip":
            return frozenset({None})  # an NVIDIA GPU: torch is not a ROCm build
        if isinstance(base, Ext):
            return frozenset({Ext(f"{base.dotted}.{attr}")})
        if isinstance(base, ModRef):
            return self.global_(attr, base.path)
        if isinstance(base, Props) and attr in ("major", "minor"):
            self.touched = True
            return frozenset({self.cap[0] if attr == "major" else self.cap[1]})
        return ANY

    def _e_Call(self, node: ast.Call, frame: Frame) -> Values:
        callees = self.eval(node.func, frame)
        if any(isinstance(a, ast.Starred) for a in node.args):
            return ANY
        args = tuple(self.eval(a, frame) for a in node.args)
        kwargs = tuple((k.arg, self.eval(k.value, frame)) for k in node.keywords if k.arg)
        if len(kwargs) != len(node.keywords):
            return ANY
        return values_of(v for callee in callees for v in self.call(callee, args, kwargs))

    # -- names and calls -----------------------------------------------------

    def lookup(self, name: str, frame: Frame, line: int = 0) -> Values:
        """A name in ``frame`` read at ``line``: its function's bindings (the last one
        above the line, as the code reads top to bottom), then the module's."""
        if frame.env is not None and name in frame.env:
            return frame.env[name]
        if frame.local is not None and name in frame.local.names:
            if frame.env is not None:
                return ANY  # assigned later in the body being run
            bindings = frame.local.names[name]
            above = [b for b in bindings if 0 < b.line < line]
            if above:
                last = max(b.line for b in above)
                bindings = [b for b in above if b.line == last]
            return self._bound(bindings, frame)
        return self.global_(name, frame.path)

    def global_(self, name: str, path: str, seen: frozenset[str] = frozenset()) -> Values:
        """``name`` at the top level of the module at ``path`` (star imports followed)."""
        module = self.module(path)
        if module is None or path in seen:
            return ANY
        scope = module[1]
        if name in scope.names:
            key = ("g", path, name, self.cap)
            return self._cached(key, lambda: self._bound(scope.names[name], Frame(path)))
        for star, level in scope.stars:
            target = self.index.find(star, path, level)
            if target is not None:
                found = self.global_(name, target, seen | {path})
                if found != ANY:
                    return found
        # Bound nowhere in the tree: a builtin or a name from outside (``torch``).
        return ANY if scope.stars and name[:1] == "_" else frozenset({Ext(name)})

    def _binds(self, name: str, path: str) -> bool:
        """Whether the module at ``path`` binds ``name`` (or may, through a star import):
        ``from pkg import config`` is the submodule where ``pkg/__init__.py`` does not."""
        module = self.module(path)
        return module is None or name in module[1].names or bool(module[1].stars)

    def _bound(self, bindings: list[Binding], frame: Frame) -> Values:
        return values_of(v for b in bindings for v in self._binding(b, frame))

    def _binding(self, binding: Binding, frame: Frame) -> Values:
        if binding.kind == "def" and isinstance(binding.node, ast.FunctionDef | ast.AsyncFunctionDef):
            return frozenset({Func(frame.path, binding.node)})
        if binding.kind == "expr" and isinstance(binding.node, ast.expr):
            values = self.eval(binding.node, frame)
            for n in binding.index:
                values = values_of(index(v, n) if n >= 0 else UNK for v in values)
            return values
        if binding.kind == "import":
            return self.imported(binding, frame.path)
        if binding.kind == "param":
            passed = self._passed_nodes(binding, frame.path)
            if not passed:
                return ANY
            if self._following:  # not followed from here, but asked directly it is
                self._cut = True
                return ANY
            self._following = True  # one hop: a caller's own parameter is unknown
            try:
                return values_of(v for n, f in passed for v in self.eval(n, f))
            finally:
                self._following = False
        return ANY

    # -- a private helper's parameters, from its callers ---------------------

    def _param_touches(self, binding: Binding, path: str) -> bool:
        passed = self._passed_nodes(binding, path)
        if not passed:
            return False
        if self._following:  # one hop (see :meth:`_binding`)
            return False
        self._following = True
        try:
            return any(self.may_read_gpu(n, f) for n, f in passed)
        finally:
            self._following = False

    def _passed_nodes(self, binding: Binding, path: str) -> list[tuple[ast.expr, Frame]]:
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
        module = self.module(path)
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

    def imported(self, binding: Binding, importer: str) -> Values:
        target = self.index.find(binding.module, importer, binding.level)
        if not binding.attr:
            return frozenset({ModRef(target) if target else Ext(binding.module)})
        if target is not None and self._binds(binding.attr, target):
            found = self.global_(binding.attr, target)
            if found != ANY:
                return found
        sub = self.index.find(f"{binding.module}.{binding.attr}".strip("."), importer,
                              binding.level)
        if sub is not None:
            return frozenset({ModRef(sub)})
        if target is not None:
            return ANY
        return frozenset({Ext(f"{binding.module}.{binding.attr}".strip("."))})

    def call(self, callee: Any, args: tuple[Values, ...],
             kwargs: tuple[tuple[str, Values], ...]) -> Values:
        """What calling ``callee`` returns on the current capability."""
        if isinstance(callee, Func):
            reads = self.touch.node(callee.path, callee.node) or toolkit_in(*args)
            return self.run(callee, args, kwargs) if reads else ANY
        if isinstance(callee, Partial):
            if not self.touch.node(callee.func.path, callee.func.node):
                return ANY
            merged = dict(callee.kwargs) | dict(kwargs)
            return self.run(callee.func, callee.args + args, tuple(merged.items()))
        if callee is TOOLKIT or isinstance(callee, Ext) and toolkit_in(*args, *(v for _, v in kwargs)):
            return frozenset({TOOLKIT})  # `cuda.split(".")`, `parse(cuda)`, `map(int, ...)`
        if isinstance(callee, Ext):
            return self._external(callee.dotted, args, kwargs)
        return ANY

    def _external(self, dotted: str, args: tuple[Values, ...],
                  kwargs: tuple[tuple[str, Values], ...]) -> Values:
        last = dotted.rsplit(".", 1)[-1]
        if last == "get_device_capability":
            self.touched = True
            return frozenset({self.cap})
        if last == "get_device_properties":
            return frozenset({Props()})
        if dotted == "torch.cuda.is_available":
            return frozenset({True})  # the question is a machine with the target's GPU
        if last == "partial" and args:
            return values_of(Partial(f, args[1:], kwargs) if isinstance(f, Func) else UNK
                           for f in args[0])
        if last in IDENTITY or dotted in IDENTITY:
            return args[0] if args and not kwargs else frozenset({Ext("functools.cache")})
        builtin = BUILTINS.get(dotted)
        if builtin is not None and len(args) == 1 and not kwargs:
            return values_of(UNK if vague(v) else safe(builtin, v) for v in args[0])
        return ANY

    def run(self, func: Func, args: tuple[Values, ...],
            kwargs: tuple[tuple[str, Values], ...]) -> Values:
        """The values ``func`` may return for these arguments (its body, interpreted)."""
        node = func.node
        env = self._bind_args(func, args, kwargs)
        if env is None:
            return ANY
        key = ("r", id(node), tuple(sorted(env.items(), key=lambda kv: kv[0])), self.cap)
        frame = Frame(func.path, self.function_scope(node), env, id(node))
        return self._cached(key, lambda: run_body(self, node.body, frame))

    def _bind_args(self, func: Func, args: tuple[Values, ...],
                   kwargs: tuple[tuple[str, Values], ...]) -> dict[str, Values] | None:
        spec = func.node.args
        positional = [*spec.posonlyargs, *spec.args]
        env: dict[str, Values] = {}
        defaults = [None] * (len(positional) - len(spec.defaults)) + list(spec.defaults)
        for n, (arg, default) in enumerate(zip(positional, defaults, strict=True)):
            if n < len(args):
                env[arg.arg] = args[n]
            elif default is not None:
                env[arg.arg] = self.eval(default, Frame(func.path))
            else:
                env[arg.arg] = ANY
        for arg, kw_default in zip(spec.kwonlyargs, spec.kw_defaults, strict=True):
            env[arg.arg] = self.eval(kw_default, Frame(func.path)) if kw_default else ANY
        for extra in (spec.vararg, spec.kwarg):
            if extra is not None:
                env[extra.arg] = ANY
        for name, value in kwargs:
            if name in env:
                env[name] = value
            elif spec.kwarg is None:
                return None
        return env


