"""The Python modules of one upstream tree: dotted names, and the bindings of each scope.

The arch evaluator (:mod:`contrib.analysis.archeval`) asks what a name means at a
point of the tree: a function defined there, a value assigned there, a name
imported from another module of the tree (``from sglang.srt.utils import
is_sm100_supported``, through ``__init__``'s ``from .common import *``).  As
pyflakes' ``Checker`` does, the bindings of a scope are collected in one pass of
its statements and kept; nothing here runs the code.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

Reader = Callable[[str], "str | None"]


@dataclass(frozen=True)
class Binding:
    """What one statement binds a name to.

    ``kind``: ``expr`` (``node`` is the value, ``index`` picks an element of a
    tuple target), ``def`` (a function), ``class``, ``import`` (``module`` and
    ``attr``; attr empty for ``import x.y as z``), ``unknown`` (a loop target, an
    augmented assignment, a parameter)."""

    kind: str
    node: ast.AST | None = None
    module: str = ""
    attr: str = ""
    index: tuple[int, ...] = ()
    level: int = 0  # relative import level
    line: int = 0  # where the binding statement starts


@dataclass
class Scope:
    """The bindings of one module or function body, by name."""

    names: dict[str, list[Binding]] = field(default_factory=dict)
    stars: list[tuple[str, int]] = field(default_factory=list)  # `from m import *`

    def add(self, name: str, binding: Binding) -> None:
        """Record one more binding of ``name``."""
        self.names.setdefault(name, []).append(binding)


def targets_of(target: ast.expr, index: tuple[int, ...] = ()
               ) -> Iterable[tuple[str, tuple[int, ...]]]:
    """Names bound by an assignment target, with their position in a tuple target."""
    if isinstance(target, ast.Name):
        yield target.id, index
    elif isinstance(target, ast.Tuple | ast.List):
        for n, element in enumerate(target.elts):
            if isinstance(element, ast.Starred):
                yield from ((name, (-1,)) for name, _ in targets_of(element.value))
            else:
                yield from targets_of(element, (*index, n))


def _bind_statement(scope: Scope, node: ast.stmt) -> list[list[ast.stmt]]:
    """Bind what ``node`` binds; return the nested blocks that bind in the same scope."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        scope.add(node.name, Binding("def", node))
    elif isinstance(node, ast.ClassDef):
        scope.add(node.name, Binding("class", node))
    elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            for name, index in targets_of(target):
                scope.add(name, Binding("expr", node.value, index=index, line=node.lineno))
    elif isinstance(node, ast.AugAssign | ast.For | ast.AsyncFor | ast.With | ast.AsyncWith):
        _bind_unknown(scope, node)
    elif isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                scope.add(alias.asname, Binding("import", module=alias.name))
            else:
                top = alias.name.split(".")[0]
                scope.add(top, Binding("import", module=top))
    elif isinstance(node, ast.ImportFrom):
        for alias in node.names:
            if alias.name == "*":
                scope.stars.append((node.module or "", node.level))
            else:
                scope.add(alias.asname or alias.name, Binding(
                    "import", module=node.module or "", attr=alias.name, level=node.level))
    return [getattr(node, name) for name in ("body", "orelse", "finalbody")
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and isinstance(getattr(node, name, None), list)] + [
        h.body for h in getattr(node, "handlers", [])] + [
        c.body for c in getattr(node, "cases", [])]  # fmt: skip


def _bind_unknown(scope: Scope, node: ast.stmt) -> None:
    targets: list[ast.expr] = []
    if isinstance(node, ast.AugAssign | ast.For | ast.AsyncFor):
        targets = [node.target]
    elif isinstance(node, ast.With | ast.AsyncWith):
        targets = [i.optional_vars for i in node.items if i.optional_vars is not None]
    for target in targets:
        for name, _ in targets_of(target):
            scope.add(name, Binding("unknown", line=node.lineno))


def scope_of_body(body: list[ast.stmt], args: ast.arguments | None = None) -> Scope:
    """The bindings of a module's or a function's statements (nested blocks included,
    nested functions' own bodies not)."""
    scope = Scope()
    if args is not None:
        every = [*args.posonlyargs, *args.args, *args.kwonlyargs]
        every += [a for a in (args.vararg, args.kwarg) if a is not None]
        for arg in every:
            scope.add(arg.arg, Binding("unknown"))
    blocks = [body]
    while blocks:
        for statement in blocks.pop():
            blocks += _bind_statement(scope, statement)
    return scope


class ModuleIndex:
    """Which file of the tree holds a dotted module name."""

    def __init__(self, paths: Iterable[str]) -> None:
        self._by_name: dict[str, list[str]] = {}
        for path in paths:
            if path.endswith(".py"):
                for name in _suffix_names(path):
                    self._by_name.setdefault(name, []).append(path)

    def find(self, name: str, importer: str = "", level: int = 0) -> str | None:
        """The file of module ``name`` (relative to ``importer`` for ``level`` > 0)."""
        if level:
            base = PurePosixPath(importer).parent
            for _ in range(level - 1):
                base = base.parent
            stem = (base / name.replace(".", "/")) if name else base
            for candidate in (f"{stem}.py", f"{stem}/__init__.py"):
                if candidate in self._paths():
                    return candidate
            return None
        found = self._by_name.get(name)
        return min(found, key=len) if found else None

    def paths(self) -> list[str]:
        """Every module file of the tree, sorted."""
        return sorted(self._paths())

    def _paths(self) -> set[str]:
        cached: set[str] | None = getattr(self, "_all", None)
        if cached is None:
            cached = {p for ps in self._by_name.values() for p in ps}
            self._all = cached
        return cached


def _suffix_names(path: str) -> list[str]:
    """``python/sglang/srt/utils/common.py`` -> ``common``, ``utils.common``, ...;
    a package's ``__init__.py`` is named after its folder."""
    parts = list(PurePosixPath(path).with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return [".".join(parts[n:]) for n in range(len(parts)) if parts[n:]]


def bound_names(node: ast.stmt) -> set[str]:
    """Every name a compound statement binds anywhere in its blocks (a loop's target too)."""
    scope = Scope()
    blocks = [[node]]
    while blocks:
        for statement in blocks.pop():
            blocks += _bind_statement(scope, statement)
    return set(scope.names)
