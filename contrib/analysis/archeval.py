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

This module decides what names, attributes and calls are worth (bindings, the
tree's functions run, what torch and the builtins answer) and keeps the caches;
operators and literals are :mod:`~contrib.analysis.archexpr`'s, a function body
:mod:`~contrib.analysis.archrun`'s, whether a name can reach the GPU at all
:mod:`~contrib.analysis.archtouch`'s, and what a private helper's callers pass it
:mod:`~contrib.analysis.archcallers`'s.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from typing import Any

from contrib.analysis.archcallers import Callers
from contrib.analysis.archexpr import evaluate
from contrib.analysis.archrun import run_body
from contrib.analysis.archtoolkit import toolkit_call
from contrib.analysis.archtouch import SOURCES, Touch
from contrib.analysis.archvalues import (
    ANY,
    BUILTINS,
    IDENTITY,
    TOOLKIT,
    UNK,
    Cap,
    Ext,
    Frame,
    Func,
    ModRef,
    Partial,
    Props,
    Toolkit,
    Values,
    index,
    safe,
    toolkit_in,
    vague,
    values_of,
)
from contrib.analysis.pymodules import Binding, ModuleIndex, Reader, Scope, scope_of_body
from contrib.analysis.pyparse import parse_python
from contrib.analysis.pywalk import walk

_DEPTH = 24  # nested calls followed
# other accelerators' runtimes in torch, absent where the target GPU runs
# (sglang's get_device_capability() asks `torch.xpu.is_available()` after CUDA)
_OTHER_DEVICES = frozenset(f"torch.{name}.is_available"
                           for name in ("xpu", "hpu", "npu", "mps", "musa", "mlu"))


class TreeEval:
    """The arch evaluator of one tree; modules are parsed on first use and kept."""

    def __init__(self, read: Reader, paths: Iterable[str],
                 trees: dict[str, ast.Module | None] | None = None,
                 toolkit: Toolkit | None = None) -> None:
        """``trees``: the parsed modules by path, shared with other evaluators of the
        same texts (a module is parsed once for all of them).  ``toolkit``: a machine
        where this toolkit works is asked about (what a JIT build runs on): its release
        is read where the code asks (:mod:`~contrib.analysis.archtoolkit`) and a
        ``try`` body runs (:mod:`~contrib.analysis.archrun`); None: the audit's
        question, a toolkit new enough for every test of it, and any call may fail."""
        self.read = read
        self.toolkit = toolkit or TOOLKIT
        self.working = toolkit is not None
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
        self.callers = Callers(self.module, self.function_scope)

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

    def _param_touches(self, binding: Binding, path: str) -> bool:
        """Whether what the callers of a private helper pass for a parameter may read
        the GPU (:class:`~contrib.analysis.archcallers.Callers`)."""
        passed = self.callers.passed(binding, path)
        if not passed:
            return False
        if self._following:  # one hop (see :meth:`_binding`)
            return False
        self._following = True
        try:
            return any(self.may_read_gpu(n, f) for n, f in passed)
        finally:
            self._following = False

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
        return evaluate(self, node, frame)

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
            passed = self.callers.passed(binding, frame.path)
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

    def attribute(self, base: Any, attr: str) -> Values:
        """Attribute ``attr`` of the value ``base``: a tree module's name, an outside
        name's (``torch.version.cuda``: the toolkit), the GPU's ``.major``/``.minor``."""
        dotted = f"{base.dotted}.{attr}" if isinstance(base, Ext) else ""
        if isinstance(base, Toolkit):
            return frozenset({base})  # its version, `.split`, `.major`: the toolkit still
        if dotted == "torch.version.cuda":
            return frozenset({self.toolkit})
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
        if isinstance(callee, Toolkit) or isinstance(callee, Ext) and toolkit_in(
                *args, *(v for _, v in kwargs)):
            return frozenset({self.toolkit})  # `cuda.split(".")`, `parse(cuda)`, `map(int, ...)`
        if isinstance(callee, Ext) and self.working:
            read = toolkit_call(callee.dotted, args, self.toolkit)
            if read is not None:
                return read
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
        if dotted in _OTHER_DEVICES:
            return frozenset({False})  # ... and with no other accelerator's runtime
        if dotted == "hasattr" and len(args) == 2 and args[1] == frozenset({"cuda"}) \
                and args[0] == frozenset({Ext("torch")}):
            return frozenset({True})  # `hasattr(torch, "cuda")`: torch with CUDA, there
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

    def bind(self, func: Func, args: tuple[Values, ...],
             kwargs: tuple[tuple[str, Values], ...] = ()) -> dict[str, Values] | None:
        """``func``'s parameters bound to ``args`` and ``kwargs`` (defaults read, the
        rest unknown); None when it takes no such keyword."""
        return self._bind_args(func, args, kwargs)

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


