"""Where a tree's JIT formats the target nvcc builds, and where that target comes from.

flashinfer's ``CompilationContext.get_nvcc_flags_list`` formats
``f"-gencode=arch=compute_{major}{minor},code=sm_{major}{minor}"`` for each
``(major, minor)`` of ``self.TARGET_CUDA_ARCHS``, a set its ``__init__`` fills with
``self._normalize_cuda_arch(major, minor)`` of each device's capability.  Read by
mechanism, not by name: a :class:`Site` is an f-string of the package (not its tests)
with a field right after ``compute_``; the loop binding its fields is followed back
through the function's names and comprehensions to the collection it iterates (an
attribute of ``self``, or a module's name); each :class:`Fill` is a statement adding
to that collection (``.add(x)``, ``.append(x)``).  An f-string whose fields are the
function's own names is its own fill.  What each is worth on a GPU is
:mod:`~contrib.analysis.jittarget`'s.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass

from contrib.analysis.pywalk import parents, walk

Function = ast.FunctionDef | ast.AsyncFunctionDef
# a field formatted into an nvcc target: `compute_{major}`, `compute_{}`.format(...)
MAY_FORMAT = re.compile(r"compute_\{")
_OUTSIDE = frozenset({"tests", "test", "benchmarks", "docs", "examples", "scripts"})
_WRAPPERS = frozenset({"sorted", "list", "set", "tuple", "reversed", "frozenset"})
_ADDS = frozenset({"add", "append"})
_DEPTH = 6  # names followed back from a loop to its collection


@dataclass(frozen=True)
class Fill:
    """A statement of ``function`` (a method of ``owner``) whose ``element`` becomes a
    target: added to the collection a :class:`Site` formats, or the f-string itself."""

    path: str
    owner: ast.ClassDef | None
    function: Function
    statement: ast.stmt
    element: ast.expr


@dataclass(frozen=True)
class Site:
    """An f-string formatting an nvcc target; ``target``: the loop target binding its
    fields (None: the function's own names, and ``fills`` is the f-string's own)."""

    path: str
    line: int
    function: Function
    fstring: ast.JoinedStr
    target: ast.expr | None
    fills: tuple[Fill, ...]


def sites(path: str, module: ast.Module) -> list[Site]:
    """The sites of one module of the package, each with the fills it formats."""
    if path.split("/", 1)[0] in _OUTSIDE:
        return []
    found: list[Site] = []
    for owner, function in _functions(module):
        above = parents(function)
        for node in walk(function):
            if isinstance(node, ast.JoinedStr) and _formats_target(node):
                found.append(_site(path, module, owner, function, node, above))
    return found


def _functions(module: ast.Module) -> Iterator[tuple[ast.ClassDef | None, Function]]:
    for node in module.body:
        if isinstance(node, Function):
            yield None, node
        elif isinstance(node, ast.ClassDef):
            yield from ((node, item) for item in node.body if isinstance(item, Function))


def _formats_target(node: ast.JoinedStr) -> bool:
    """``f"...compute_{x}..."``: a field right after ``compute_``."""
    return any(isinstance(a, ast.Constant) and isinstance(a.value, str)
               and a.value.endswith("compute_") and isinstance(b, ast.FormattedValue)
               for a, b in zip(node.values, node.values[1:], strict=False))


def _site(path: str, module: ast.Module, owner: ast.ClassDef | None, function: Function,
          fstring: ast.JoinedStr, above: dict[int, ast.AST]) -> Site:
    fields = {n.id for v in fstring.values if isinstance(v, ast.FormattedValue)
              for n in walk(v.value) if isinstance(n, ast.Name)}
    loop = _loop(fstring, fields, above)
    if loop is None:
        statement = _statement(fstring, above)
        own = [Fill(path, owner, function, statement, fstring)] if statement else []
        return Site(path, fstring.lineno, function, fstring, None, tuple(own))
    target, iterated = loop
    fills = tuple(fill for source in _sources(iterated, function, 0)
                  for fill in _fills(path, module, owner, source))
    return Site(path, fstring.lineno, function, fstring, target, fills)


def _loop(node: ast.AST, fields: set[str], above: dict[int, ast.AST]
          ) -> tuple[ast.expr, ast.expr] | None:
    """The nearest ``for`` or comprehension around ``node`` binding one of ``fields``:
    its target and what it iterates."""
    current = above.get(id(node))
    while current is not None:
        loops: list[tuple[ast.expr, ast.expr]] = []
        if isinstance(current, ast.For | ast.AsyncFor):
            loops = [(current.target, current.iter)]
        elif isinstance(current, ast.ListComp | ast.SetComp | ast.GeneratorExp):
            loops = [(g.target, g.iter) for g in current.generators]
        for target, iterated in loops:
            if fields & {n.id for n in walk(target) if isinstance(n, ast.Name)}:
                return target, iterated
        current = above.get(id(current))
    return None


def _statement(node: ast.AST, above: dict[int, ast.AST]) -> ast.stmt | None:
    current = above.get(id(node))
    while current is not None and not isinstance(current, ast.stmt):
        current = above.get(id(current))
    return current if isinstance(current, ast.stmt) else None


Source = tuple[str, str]  # ("self", attribute) or ("module", name)


def _sources(node: ast.expr, function: Function, depth: int) -> list[Source]:
    """The collections ``node`` iterates: through ``sorted(x)``, a name the function
    binds (each binding), a comprehension handing its own items on."""
    if depth > _DEPTH:
        return []
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id in _WRAPPERS and len(node.args) == 1:
        return _sources(node.args[0], function, depth + 1)
    if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp) \
            and len(node.generators) == 1 and isinstance(node.elt, ast.Name) \
            and isinstance(node.generators[0].target, ast.Name) \
            and node.elt.id == node.generators[0].target.id:
        return _sources(node.generators[0].iter, function, depth + 1)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
            and node.value.id in ("self", "cls"):
        return [("self", node.attr)]
    if isinstance(node, ast.Name):
        values = [value for target, value in _assignments(function) if target == node.id]
        if not values:
            return [("module", node.id)]
        return [s for value in values for s in _sources(value, function, depth + 1)]
    return []


def _assignments(function: Function) -> Iterator[tuple[str, ast.expr]]:
    for node in walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            yield node.targets[0].id, node.value


def _fills(path: str, module: ast.Module, owner: ast.ClassDef | None,
           source: Source) -> Iterator[Fill]:
    """The statements adding to ``source``: ``self.X.add(e)`` in ``owner``'s methods,
    ``X.append(e)`` in the module's functions."""
    kind, name = source
    for holder, function in _functions(module):
        if kind == "self" and (owner is None or holder is not owner):
            continue
        above = parents(function)
        for node in walk(function):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in _ADDS and len(node.args) == 1 \
                    and _names(node.func.value, source):
                statement = _statement(node, above)
                if statement is not None:
                    yield Fill(path, holder, function, statement, node.args[0])


def _names(node: ast.expr, source: Source) -> bool:
    kind, name = source
    if kind == "self":
        return isinstance(node, ast.Attribute) and node.attr == name \
            and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
    return isinstance(node, ast.Name) and node.id == name
