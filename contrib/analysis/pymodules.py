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
    ``attr``; attr empty for ``import x.y as z``), ``param`` (a parameter: ``attr``
    its name, ``node`` its function when known), ``unknown`` (a loop target, an
    augmented assignment; a `with` target keeps its context expression as ``node``)."""

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
        c.body for c in getattr(node, "cases", [])]


def _bind_unknown(scope: Scope, node: ast.stmt) -> None:
    targets: list[tuple[ast.expr, ast.expr | None]] = []
    if isinstance(node, ast.AugAssign | ast.For | ast.AsyncFor):
        targets = [(node.target, None)]
    elif isinstance(node, ast.With | ast.AsyncWith):  # the context it comes from is kept
        targets = [(i.optional_vars, i.context_expr) for i in node.items
                   if i.optional_vars is not None]
    for target, source in targets:
        for name, _ in targets_of(target):
            scope.add(name, Binding("unknown", node=source, line=node.lineno))


def scope_of_body(body: list[ast.stmt], args: ast.arguments | None = None,
                  owner: ast.AST | None = None) -> Scope:
    """The bindings of a module's or a function's statements (nested blocks included,
    nested functions' own bodies not); ``owner``: the function whose ``args`` they are."""
    scope = Scope()
    if args is not None:
        every = [*args.posonlyargs, *args.args, *args.kwonlyargs]
        every += [a for a in (args.vararg, args.kwarg) if a is not None]
        for arg in every:
            scope.add(arg.arg, Binding("param", node=owner, attr=arg.arg))
    blocks = [body]
    while blocks:
        for statement in blocks.pop():
            blocks += _bind_statement(scope, statement)
    return scope


class ModuleIndex:
    """Which file of the tree holds a dotted module name.

    The tree's source roots are not known (``python/``, ``src/``, the top), so a
    module is found by the tail of its path: ``sglang.srt.utils`` is
    ``python/sglang/srt/utils/__init__.py``.  A tail that starts inside a package
    is no absolute name, though: ``import flashinfer`` in sglang is the installed
    package, not ``python/sglang/srt/layers/moe/token_dispatcher/flashinfer.py``,
    whose folder holds an ``__init__.py``.  Such a file answers only an importer
    at or below the folder the tail starts in, as a script's or a test's own
    folder is on ``sys.path`` (``from utils import x`` in ``tests/attention``)."""

    def __init__(self, paths: Iterable[str]) -> None:
        self._by_name: dict[str, list[tuple[str, str | None]]] = {}
        files = [p for p in paths if p.endswith(".py")]
        packages = {str(PurePosixPath(p).parent) for p in files if p.endswith("/__init__.py")}
        for path in files:
            for name, start in _suffix_names(path):
                # `start`: the folder the name starts in, when that folder is a package.
                self._by_name.setdefault(name, []).append(
                    (path, start if start in packages else None))
        self._all = set(files)

    def find(self, name: str, importer: str = "", level: int = 0) -> str | None:
        """The file of module ``name`` (relative to ``importer`` for ``level`` > 0)."""
        if level:
            base = PurePosixPath(importer).parent
            for _ in range(level - 1):
                base = base.parent
            stem = (base / name.replace(".", "/")) if name else base
            for candidate in (f"{stem}.py", f"{stem}/__init__.py"):
                if candidate in self._all:
                    return candidate
            return None
        found = self._by_name.get(name)
        if not found:
            return None
        absolute = [p for p, inside in found if inside is None]
        if absolute:
            return min(absolute, key=len)
        here = str(PurePosixPath(importer).parent)
        if f"{here}/__init__.py" in self._all:
            return None  # a package's module imports absolutely: `import cudnn` is cuDNN's
        local = [p for p, inside in found if inside is not None
                 and (here == inside or here.startswith(inside + "/"))]
        return min(local, key=len) if local else None

    def paths(self) -> list[str]:
        """Every module file of the tree, sorted."""
        return sorted(self._all)


def _suffix_names(path: str) -> list[tuple[str, str]]:
    """``python/sglang/srt/utils/common.py`` -> ``common``, ``utils.common``, ..., each
    with the folder it starts in (``python/sglang/srt/utils``, ...); a package's
    ``__init__.py`` is named after its folder."""
    parts = list(PurePosixPath(path).with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return [(".".join(parts[n:]), "/".join(parts[:n]) or ".") for n in range(len(parts))
            if parts[n:]]


def bound_names(node: ast.stmt) -> set[str]:
    """Every name a compound statement binds anywhere in its blocks (a loop's target too)."""
    scope = Scope()
    blocks = [[node]]
    while blocks:
        for statement in blocks.pop():
            blocks += _bind_statement(scope, statement)
    return set(scope.names)
