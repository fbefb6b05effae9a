"""Splice the smallest source change that lets the target through one gate.

Every edit is found with :mod:`ast` positions and applied to the file's own
bytes: a list gains an element after its neighbour, a condition gains an
``or`` term, an import or a module-level value gains a sibling line copied
from the one next to it.  Nothing else of the file moves, so the diff is the
few characters upstream would have typed.  ``ast`` columns count UTF-8 bytes,
hence the byte offsets throughout.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from contrib.analysis.pyparse import parse
from contrib.arch import Arch

_SM_DIGITS = re.compile(r"(?<=sm)_?(\d{2,3})(?=[af]?(?:_|\b|$))", re.I)


class CannotEdit(Exception):
    """The gate's code has no shape contrib knows how to widen (the message says which)."""


@dataclass(frozen=True)
class Splice:
    """Replace bytes ``start:end`` of a file with ``new``."""

    start: int
    end: int
    new: bytes


class Source:
    """One Python file: its bytes, its tree, and byte offsets of ``ast`` positions."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.data = text.encode("utf-8")
        self.module = parse(text, path)
        self._starts = [0]
        for line in self.data.splitlines(keepends=True):
            self._starts.append(self._starts[-1] + len(line))
        self.parents = {id(c): n for n in ast.walk(self.module) for c in ast.iter_child_nodes(n)}

    def offset(self, line: int, col: int) -> int:
        return self._starts[line - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        start = self.offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]
        end = self.offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
        return start, end

    def segment(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.data[start:end].decode("utf-8")

    def line_text(self, line: int) -> bytes:
        return self.data[self._starts[line - 1]:self._starts[line]]


def apply(data: bytes, splices: list[Splice]) -> bytes:
    """``data`` with every splice made (they must not overlap)."""
    out = data
    for splice in sorted(splices, key=lambda s: (s.start, s.end), reverse=True):
        out = out[:splice.start] + splice.new + out[splice.end:]
    return out


# -- int lists: supported_major_versions=[9, 10], @supported_compute_capability([100, 103])

def int_values(node: ast.expr) -> list[int] | None:
    """The ints of a list/tuple/set literal of int constants, else None."""
    if not isinstance(node, ast.List | ast.Tuple | ast.Set):
        return None
    values = [e.value for e in node.elts if isinstance(e, ast.Constant)
              and isinstance(e.value, int) and not isinstance(e.value, bool)]
    return values if len(values) == len(node.elts) else None


def is_capability_list(values: list[int]) -> bool:
    """``[100, 103]`` spells capabilities (major*10+minor); ``[9, 10]`` spells majors."""
    return bool(values) and all(v >= 20 for v in values)


def widen_list(src: Source, node: ast.expr, add: list[int]) -> list[Splice]:
    """Insert each value of ``add`` missing from the literal ``node``, in sorted place."""
    values = int_values(node)
    assert values is not None
    elements = list(node.elts)  # type: ignore[attr-defined]
    missing = sorted(set(add) - set(values))
    if not elements:
        start, end = src.span(node)
        return [Splice(start + 1, end - 1, ", ".join(map(str, missing)).encode())]
    after: dict[int, list[int]] = {}
    for value in missing:
        before = [i for i, v in enumerate(values) if v < value]
        after.setdefault(before[-1] if before else -1, []).append(value)
    splices = []
    for index, new in after.items():
        text = ", ".join(map(str, new))
        if index < 0:
            start = src.span(elements[0])[0]
            splices.append(Splice(start, start, f"{text}, ".encode()))
        else:
            end = src.span(elements[index])[1]
            splices.append(Splice(end, end, f", {text}".encode()))
    return splices


def target_capabilities(src: Source, arch: Arch, node: ast.expr) -> list[int]:
    """How the file spells the target's family where it writes lists like ``node`` (the
    arguments of calls of the same function, e.g. every ``supported_compute_capability``):
    each value of the target's major found there (``120, 121``), and the target's own."""
    callee = _callee(src, node)
    spelled = {v for other in ast.walk(src.module) if isinstance(other, ast.expr)
               and callee is not None and _callee(src, other) == callee
               and (values := int_values(other)) and is_capability_list(values)
               for v in values if v // 10 == arch.major}
    return sorted(spelled | {arch.major * 10 + arch.minor})


def _callee(src: Source, node: ast.expr) -> str | None:
    """The name of the call ``node`` is a positional argument of, if it is one."""
    parent = src.parents.get(id(node))
    if not isinstance(parent, ast.Call) or node not in parent.args:
        return None
    func = parent.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)


def lists_at(src: Source, first: int, last: int) -> list[ast.expr]:
    """The int-list literals that start on lines ``first``..``last``, outermost first."""
    found = [n for n in ast.walk(src.module) if isinstance(n, ast.List | ast.Tuple | ast.Set)
             and first <= n.lineno <= last and int_values(n)]
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


def major_comparisons(src: Source, first: int, last: int) -> list[ast.Compare]:
    """The comparisons of a major with one int on lines ``first``..``last`` (``cap[0] ==
    10``, ``major != 9``, ``props.major == 10``): a capability's first item, or a name or
    attribute called major; ``==`` and ``!=`` only (an order admits newer archs)."""
    found = []
    for node in ast.walk(src.module):
        if not (isinstance(node, ast.Compare) and first <= node.lineno <= last
                and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq | ast.NotEq)):
            continue
        value, left = node.comparators[0], node.left
        if not (isinstance(value, ast.Constant) and type(value.value) is int
                and 7 <= value.value <= 20):
            continue
        first_item = (isinstance(left, ast.Subscript) and isinstance(left.slice, ast.Constant)
                      and left.slice.value == 0)
        named = re.search(r"major", ast.unparse(left), re.I) is not None
        if first_item or named:
            found.append(node)
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


# -- predicates: (_is_sm90_supported or _is_sm100_supported) gains _is_sm120_supported

def sm_digits(name: str) -> str | None:
    """The SM number a predicate's name carries (``_is_sm100_supported`` -> "100")."""
    match = _SM_DIGITS.search(name) if "is_" in name.lower() else None
    return match[1] if match else None


def for_target(text: str, arch: Arch) -> str:
    """``text`` with its SM number spelled for the target (``is_sm100_supported()`` ->
    ``is_sm120_supported()``)."""
    return _SM_DIGITS.sub(f"{arch.major}{arch.minor}", text, count=1)


def predicate_name(node: ast.expr) -> str | None:
    """The name a predicate term tests: ``x``, ``f()``, ``mod.f(dev)``, ``mod.x``."""
    inner = node.func if isinstance(node, ast.Call) else node
    if isinstance(inner, ast.Name):
        return inner.id
    if isinstance(inner, ast.Attribute):
        return inner.attr
    return None


def predicate_terms(src: Source, first: int, last: int) -> list[ast.expr]:
    """Terms on lines ``first``..``last`` whose name carries an SM number."""
    terms = []
    for node in ast.walk(src.module):
        if not isinstance(node, ast.expr) or not first <= node.lineno <= last:
            continue
        name = predicate_name(node)
        parent = src.parents.get(id(node))
        callee = isinstance(parent, ast.Call) and parent.func is node  # `f` of `f()`
        inner = isinstance(node, ast.Name | ast.Attribute) and isinstance(parent, ast.Attribute)
        if name and sm_digits(name) and not callee and not inner:
            terms.append(node)
    return sorted(terms, key=lambda n: (n.lineno, n.col_offset))


def add_term(src: Source, terms: list[ast.expr], arch: Arch) -> tuple[list[Splice], str]:
    """One more ``or`` term after the last predicate of the condition; (splices, the term)."""
    last = terms[-1]
    new = for_target(src.segment(last), arch)
    parent = src.parents.get(id(last))
    start, end = src.span(last)
    if isinstance(parent, ast.stmt) or (isinstance(parent, ast.BoolOp)
                                        and isinstance(parent.op, ast.Or)):
        return [Splice(end, end, f" or {new}".encode())], new
    return [Splice(start, start, b"("), Splice(end, end, f" or {new})".encode())], new


def module_value(src: Source, name: str) -> ast.Assign | None:
    """The module-level ``name = ...`` assignment, if the file keeps one."""
    for statement in src.module.body:
        if isinstance(statement, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in statement.targets):
            return statement
    return None


def add_sibling_line(src: Source, statement: ast.stmt, arch: Arch) -> Splice:
    """A copy of ``statement``'s lines spelled for the target, inserted after it."""
    first = src.offset(statement.lineno, 0)
    end = src.offset((statement.end_lineno or statement.lineno) + 1, 0)
    text = src.data[first:end].decode("utf-8")
    copied = _SM_DIGITS.sub(f"{arch.major}{arch.minor}", text)
    return Splice(end, end, copied.encode())


def imported_from(src: Source, name: str) -> ast.ImportFrom | None:
    """The ``from M import ..., name, ...`` that brings ``name`` in, at any depth."""
    for node in ast.walk(src.module):
        if isinstance(node, ast.ImportFrom) and any(a.name == name for a in node.names):
            return node
    return None


def add_import(src: Source, statement: ast.ImportFrom, after: str, new: str) -> Splice:
    """``new`` joins ``from M import (...)`` right after ``after``, one per line when the
    import is written one per line."""
    alias = next(a for a in statement.names if a.name == after)
    start, end = src.span(alias)
    multi = (statement.end_lineno or statement.lineno) > statement.lineno and len(
        {a.lineno for a in statement.names}) == len(statement.names)
    if multi:
        line = src.line_text(alias.lineno)
        indent = line[:len(line) - len(line.lstrip())].decode()
        trailing = src.data[end:end + 1] == b","
        if trailing:
            return Splice(end + 1, end + 1, f"\n{indent}{new},".encode())
        return Splice(end, end, f",\n{indent}{new}".encode())
    return Splice(end, end, f", {new}".encode())
